import type { TaskClaim } from "../../storage/node-ledger.js";
import type { NodePoolSpec } from "./node-pool-model.js";

// Where node pools really get their nodes. The task engine calls it from a worker, after the task is stored, and
// calls it again with the same spec when a task is resumed after a stop or crash, so both operations must be
// idempotent: carry on from wherever an earlier call got to.
//
// A DomainError thrown here becomes the task's error as it is (RESOURCE_EXHAUSTED, UNAVAILABLE, ...); anything
// else is a fault, logged, and reported as INTERNAL. When `signal` aborts (the server is stopping), stop at a
// safe point and throw; the task is resumed by the next worker. `claim` names the task and the worker running it: a
// change is made only while that worker still holds the task, else ClaimLostError (src/storage/node-ledger.ts).
export interface NodePoolProvider {
  // Makes the pool exist with the spec's name, flavor and node count: create, rename, scale up or down.
  apply(spec: NodePoolSpec, claim: TaskClaim, signal: AbortSignal): Promise<void>;
  // Removes the pool and its nodes; succeeds for a pool that has no nodes or is already gone.
  remove(spec: NodePoolSpec, claim: TaskClaim, signal: AbortSignal): Promise<void>;
}
