// What the task worker (src/compute/tasks/task-worker.ts) needs of the stores of tasks: liveness of workers and
// atomic claims. Node pool tasks and vApp tasks are two stores of claims sharing one record of live workers; the
// process's one worker takes from both (src/compute/tasks/combined-queue.ts).
export interface QueuedTask {
  id: string;
  command: string;
  // How many times a worker took the task: more than 1 means it was resumed after a stop or crash.
  attempts: number;
}

export interface WorkerLiveness {
  // Records that a worker is alive at `now`, and forgets the workers silent since before `forgetBefore` (a crashed
  // worker leaves its record behind; a forgotten worker counts as dead, as it did before). The tasks a worker holds
  // are safe from other workers only while its heartbeat is fresh.
  heartbeat(workerId: string, now: number, forgetBefore: number): Promise<void>;
  // Forgets a worker that stopped cleanly, so its unfinished tasks can be taken at once.
  retireWorker(workerId: string): Promise<void>;
}

export interface TaskClaims<T extends QueuedTask> {
  // Takes the oldest task that is waiting, or running under another worker whose heartbeat is older than
  // `staleBefore` (or gone): marks it running under `workerId` and counts the attempt. Null when there is none.
  claimTask(workerId: string, now: number, staleBefore: number): Promise<T | null>;
}

export interface TaskQueue<T extends QueuedTask> extends WorkerLiveness, TaskClaims<T> {}

// What the task retention (src/compute/tasks/task-retention.ts) needs of each store of tasks.
export interface FinishedTaskPruning {
  // Deletes up to `limit` of the finished tasks (succeeded or failed) that finished before `before`, those that
  // finished first first, and returns how many it deleted. An unfinished task is never deleted, whatever its age: a
  // worker holds it or will, and its pool or vApp names it.
  pruneFinishedTasks(before: number, limit: number): Promise<number>;
}
