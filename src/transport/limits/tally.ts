import { ViolationList, tooManyItems } from "../../errors/violation-list.js";
import { MAX_EXTRA_VALUES } from "../../pipeline/message-limits.js";
import type { FieldLimit } from "../../pipeline/message-limits.js";

// What one count of a request found over its limits: the fields with too many elements, by JSON path, and the
// values beyond the fields of their types (unknown fields, fields given more than once).
export class Tally {
  #violations: ViolationList | null = null;
  extra = 0;

  over(path: string, limit: FieldLimit, got: number): void {
    (this.#violations ??= new ViolationList()).add(path, tooManyItems(limit.max, got, limit.noun));
  }

  // Null when the request is within every limit.
  verdict(): ViolationList | null {
    if (this.extra > MAX_EXTRA_VALUES) {
      (this.#violations ??= new ViolationList()).add("", tooManyItems(MAX_EXTRA_VALUES, this.extra, "unknown fields or fields given more than once"));
    }
    return this.#violations;
  }
}

// The JSON path of a field within the message at `path`.
export function fieldPath(path: string, limit: FieldLimit): string {
  return path === "" ? limit.field.jsonName : `${path}.${limit.field.jsonName}`;
}
