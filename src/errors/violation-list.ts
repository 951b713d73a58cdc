import { printable } from "./caller-text.js";
import type { FieldViolation } from "./domain-error.js";

// What one INVALID_ARGUMENT may say, whatever the request held. A request of 4 MB can carry over a million bad
// elements; answering each one made answers of hundreds of MB and blocked the server for a minute. The first
// violations are listed (in the message and in BadRequest alike), the others only counted.
export const MAX_LISTED_VIOLATIONS = 20;
// Of the listed "field: description" texts together; with the limits below it bounds the message and the
// BadRequest to a few KB.
const MAX_LISTED_CHARS = 2048;
// Fields are JSON paths, which the REST layer builds from the names a caller sent.
const MAX_FIELD_CHARS = 128;
const MAX_DESCRIPTION_CHARS = 512;
// Of a resource id a caller names (key, node pool, cluster, task ...). Ours are far shorter; the bound keeps a
// megabyte "id" out of lookups and out of the NOT_FOUND message and ResourceInfo that would repeat it.
export const MAX_ID_CHARS = 128;

// The bad fields of one request, collected so that it fails with all of them at once and the caller fixes
// everything in one round. Violations are listed in the order they were added until 20 are listed or the next
// one would make the listed text longer than MAX_LISTED_CHARS (the first one is always listed); every later one
// is only counted, which costs nothing.
export class ViolationList {
  private readonly listed: FieldViolation[] = [];
  private listedChars = 0;
  private total = 0;

  static of(violations: readonly FieldViolation[]): ViolationList {
    const list = new ViolationList();
    for (const v of violations) list.add(v.field, v.description);
    return list;
  }

  add(field: string, description: string): void {
    this.total++;
    // Once one was left out, all later ones are too, so that the listed ones are always the first ones.
    if (this.total > this.listed.length + 1 || this.listed.length === MAX_LISTED_VIOLATIONS) return;
    const violation = { field: printable(field, MAX_FIELD_CHARS), description: printable(description, MAX_DESCRIPTION_CHARS) };
    const chars = textOf(violation).length;
    if (this.listed.length > 0 && this.listedChars + chars > MAX_LISTED_CHARS) return;
    this.listed.push(violation);
    this.listedChars += chars;
  }

  // A required resource id: present, and of a length an id can have.
  requiredId(field: string, id: string): void {
    if (id === "") this.add(field, "is required");
    else if (id.length > MAX_ID_CHARS) this.add(field, `must be at most ${MAX_ID_CHARS} characters, got ${id.length}`);
  }

  // Every violation added, listed or not.
  get count(): number {
    return this.total;
  }

  // The listed violations, then, when some were only counted, one more with an empty field (the request as a
  // whole) and the description "and N more".
  violations(): FieldViolation[] {
    const unlisted = this.total - this.listed.length;
    return unlisted === 0 ? [...this.listed] : [...this.listed, { field: "", description: `and ${unlisted} more` }];
  }

  // "field: description; field: description; and N more". A violation of the request as a whole (empty field)
  // is its description alone.
  message(): string {
    return this.violations().map(textOf).join("; ");
  }
}

function textOf(v: FieldViolation): string {
  return v.field === "" ? v.description : `${v.field}: ${v.description}`;
}

// The description of a repeated field over its bound, the same from the domain checks and from the counts the
// adapters take before decoding (src/transport/limits/): "must hold at most 64 labels, got 1390000".
export function tooManyItems(max: number, got: number, noun: string): string {
  return `must hold at most ${max} ${noun}, got ${got}`;
}
