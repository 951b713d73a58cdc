import type { QueuedTask, TaskClaims, TaskQueue, WorkerLiveness } from "../../storage/task-queue.js";

// Several stores of tasks as one queue, for the process's one task worker: node pool tasks and vApp tasks are
// stored apart, but taken by the same worker, under one worker id and one heartbeat (a second worker would write a
// second fully synchronous heartbeat every second). Claims start at a different store each time, so that no kind
// of task waits behind another's backlog.
export class CombinedQueue<T extends QueuedTask> implements TaskQueue<T> {
  private next = 0;

  constructor(
    private readonly liveness: WorkerLiveness,
    private readonly claims: readonly [TaskClaims<T>, ...TaskClaims<T>[]],
  ) {}

  heartbeat(workerId: string, now: number, forgetBefore: number): Promise<void> {
    return this.liveness.heartbeat(workerId, now, forgetBefore);
  }

  retireWorker(workerId: string): Promise<void> {
    return this.liveness.retireWorker(workerId);
  }

  async claimTask(workerId: string, now: number, staleBefore: number): Promise<T | null> {
    const first = this.next;
    this.next = (this.next + 1) % this.claims.length;
    for (let i = 0; i < this.claims.length; i++) {
      const task = await this.claims[(first + i) % this.claims.length]!.claimTask(workerId, now, staleBefore);
      if (task !== null) return task;
    }
    return null;
  }
}
