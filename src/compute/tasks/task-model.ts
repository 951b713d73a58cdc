import type { DomainErrorKind } from "../../errors/domain-error.js";
import type { NodePoolRecord, NodePoolState } from "../node-pools/node-pool-model.js";

// Tasks: the long-running changes of node pools. Plain data; times are epoch milliseconds.

export const taskCommands = ["CreateNodePool", "UpdateNodePool", "DeleteNodePool"] as const;
export type TaskCommand = (typeof taskCommands)[number];

export const taskStatuses = ["PENDING", "RUNNING", "SUCCEEDED", "FAILED"] as const;
export type TaskStatus = (typeof taskStatuses)[number];

// Why a task failed: a domain error the caller can act on (stored as its plain description), or a fault of ours
// whose cause is only in the log.
export type TaskFailure = { kind: "domain"; error: DomainErrorKind } | { kind: "internal" };

// What an UpdateNodePool task changes (null: left as it is), and, for every command, the state the pool takes if
// the change fails: ERROR after a failed create or delete, the state before the update after a failed update
// (the pool still has its old nodes).
export interface NodePoolChange {
  name: string | null;
  count: number | null;
  stateIfFailed: NodePoolState;
}

export interface TaskRecord {
  id: string;
  command: TaskCommand;
  status: TaskStatus;
  serviceInstanceId: string;
  clusterId: string;
  nodePoolId: string;
  change: NodePoolChange;
  createdBy: string;
  createdAt: number;
  modifiedAt: number;
  // Set when FAILED.
  failure: TaskFailure | null;
  // The pool as a successful create or update left it; null otherwise.
  result: NodePoolRecord | null;
  // How many times a worker took the task: more than 1 means it was resumed after a stop or crash.
  attempts: number;
}

export function isDone(status: TaskStatus): boolean {
  return status === "SUCCEEDED" || status === "FAILED";
}
