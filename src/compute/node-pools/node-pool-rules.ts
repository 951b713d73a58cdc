import type { Catalog } from "../catalog/catalog.js";
import { findFlavor } from "../catalog/catalog.js";
import { quoted } from "../../errors/caller-text.js";
import type { Violations } from "../violations.js";

// Field rules of node pool requests (seed rule 3 and CONTRACT section 6).

const NAME = /^[a-z0-9-]{3,20}$/;
const NAME_RULE = "must be 3 to 20 lowercase Latin letters, digits and hyphens (^[a-z0-9-]{3,20}$)";

export function checkName(v: Violations, field: string, name: string): void {
  if (name === "") v.add(field, `is required; it ${NAME_RULE}`);
  else if (!NAME.test(name)) v.add(field, `${NAME_RULE}, got ${quoted(name)}`);
}

export function checkFlavor(v: Violations, field: string, flavor: string, catalog: Catalog): void {
  if (flavor === "") v.add(field, "is required");
  else if (findFlavor(catalog, flavor) === undefined) {
    v.add(field, `unknown compute flavor ${quoted(flavor)}; known: ${catalog.computeFlavors.map((f) => f.id).join(", ")}`);
  }
}

// `max` is the largest pool of the cluster, or null when the cluster is not known (that is reported on its own).
export function checkCount(v: Violations, field: string, count: number, max: number | null): void {
  if (count < 0) v.add(field, `must be between 0 and ${max ?? "the cluster's largest pool size"}, got ${count}`);
  else if (max !== null && count > max) v.add(field, `must be between 0 and ${max} (the cluster's largest pool size), got ${count}`);
}
