import type { NodePoolRecord } from "../compute/node-pools/node-pool-model.js";
import type { TaskRecord } from "../compute/tasks/task-model.js";
import type { FinishedTaskPruning, TaskQueue } from "./task-queue.js";

// What starting a task on an existing pool decides: the pool as it should be stored and the new task.
export interface PoolTaskStart {
  pool: NodePoolRecord;
  task: TaskRecord;
}

// What finishing a task decides: the task in its final state, and the pool as it should be stored, or null to
// remove the pool.
export interface TaskFinish {
  task: TaskRecord;
  pool: NodePoolRecord | null;
}

export interface TaskPage {
  limit: number;
  offset: number;
}

// Storage of node pools and their tasks, written together so that a pool change and its task are never apart.
// Implementations:
// - enforce name uniqueness within a cluster over current names and pending renames (throwing the ALREADY_EXISTS
//   domain error), because only the store sees every other pool at the moment of the write;
// - make claimTask atomic, so each task is taken by one worker, and finishTask conditional on that claim, so an
//   outcome is recorded once;
// - keep each acknowledged write durable before the promise resolves.
// The unfinished tasks of one status: how many, and when the oldest was created (null when there are none).
export interface QueuedTasks {
  count: number;
  oldestCreatedAt: number | null;
}

export interface ComputeStore extends TaskQueue<TaskRecord>, FinishedTaskPruning {
  getNodePool(id: string): Promise<NodePoolRecord | null>;
  // The pools of a cluster, oldest first.
  listNodePools(serviceInstanceId: string, clusterId: string): Promise<NodePoolRecord[]>;
  // Stores a new pool together with its first task.
  createNodePool(pool: NodePoolRecord, task: TaskRecord): Promise<void>;
  // Runs `decide` on the current pool inside one transaction and stores the pool and the task it returns. Returns
  // null when the pool does not exist. `decide` may throw a domain error, which aborts the transaction.
  startPoolTask(poolId: string, decide: (current: NodePoolRecord) => PoolTaskStart): Promise<PoolTaskStart | null>;
  getTask(id: string): Promise<TaskRecord | null>;
  // The tasks of a service instance (of one pool when nodePoolId is given), newest first.
  listTasks(serviceInstanceId: string, nodePoolId: string | null, page: TaskPage): Promise<TaskRecord[]>;
  // Runs `decide` on the task and its pool inside one transaction and stores the outcome, provided the task is
  // still RUNNING under `workerId`; otherwise stores nothing and returns null.
  finishTask(taskId: string, workerId: string, decide: (task: TaskRecord, pool: NodePoolRecord | null) => TaskFinish): Promise<TaskFinish | null>;
  // The task queue as /metrics shows it: the PENDING and RUNNING tasks of every worker.
  taskQueue(): Promise<Record<"PENDING" | "RUNNING", QueuedTasks>>;
}
