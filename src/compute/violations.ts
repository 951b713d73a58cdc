import { invalidArgument } from "../errors/domain-error.js";
import { ViolationList } from "../errors/violation-list.js";

// The bad fields of one compute request, bounded as every INVALID_ARGUMENT is (src/errors/violation-list.ts).
// Fields are named by their JSON path, as callers write them.
export class Violations extends ViolationList {
  throwIfAny(): void {
    if (this.count > 0) throw invalidArgument("compute", this);
  }
}
