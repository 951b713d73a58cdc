import type { FieldViolation } from "../errors/domain-error.js";
import { invalidArgument } from "../errors/domain-error.js";

// Collects the bad fields of one request so that it fails with all of them at once, and the caller fixes
// everything in one round. Fields are named by their JSON path, as callers write them.
export class Violations {
  readonly list: FieldViolation[] = [];

  add(field: string, description: string): void {
    this.list.push({ field, description });
  }

  required(field: string, value: string): void {
    if (value === "") this.add(field, "is required");
  }

  throwIfAny(): void {
    if (this.list.length > 0) throw invalidArgument("compute", this.list);
  }
}

// Quotes a caller's value for a message, cut short so that a huge value cannot bloat the answer.
export function quote(value: string): string {
  return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
}
