import { ViolationList, tooManyItems } from "../../errors/violation-list.js";
import { MAX_EXTRA_VALUES } from "../../pipeline/message-limits.js";
import type { FieldLimit, MessageLimits } from "../../pipeline/message-limits.js";

// One message being counted: how many elements each of its fields holds, which singular fields it has seen, and
// its singular message fields (a message field given twice is merged into one, so their elements add up).
export interface Instance {
  readonly limits: MessageLimits;
  // Its JSON path in the request, "" for the request itself.
  readonly path: string;
  readonly counts: Int32Array;
  readonly seen: Uint8Array;
  readonly children: (Instance | undefined)[];
}

export function instance(limits: MessageLimits, path: string): Instance {
  const n = limits.fieldCount;
  return { limits, path, counts: new Int32Array(n), seen: new Uint8Array(n), children: new Array<Instance | undefined>(n) };
}

// What one count of a request found over its limits: the fields with too many elements, by JSON path, and the
// values beyond the fields of their types (unknown fields, fields given more than once).
export class Tally {
  #violations: ViolationList | null = null;
  extra = 0;

  over(path: string, limit: FieldLimit, got: number): void {
    (this.#violations ??= new ViolationList()).add(path, tooManyItems(limit.max, got, limit.noun));
  }

  // Once a message is counted (after the request, or after each list element or map value): its fields over their
  // limits, and those of its singular message fields.
  report(inst: Instance): void {
    for (const limit of inst.limits.byNumber.values()) {
      const count = inst.counts[limit.index]!;
      if (limit.max > 0 && count > limit.max) this.over(fieldPath(inst.path, limit), limit, count);
      const child = inst.children[limit.index];
      if (child !== undefined) this.report(child);
    }
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
