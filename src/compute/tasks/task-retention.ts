import type { Logger } from "pino";
import type { Clock } from "../../shared/clock.js";
import { PeriodicRun } from "../../shared/periodic-run.js";
import type { FinishedTaskPruning } from "../../storage/task-queue.js";

// Tasks deleted by one statement. A task row is under 1 KB (a node pool task holds the pool as it left it), so a
// piece is well under a megabyte, and calls run in between pieces: a backlog of months never holds the event loop
// for long.
export const TASK_PRUNE_PIECE = 500;

// Deletes every finished task of one store that finished before `before`, a piece at a time, and returns how many it
// deleted. `stopped` is asked between pieces, so that a shutdown does not wait for a long backlog.
export async function pruneFinishedTasks(store: FinishedTaskPruning, before: number, stopped: () => boolean = () => false): Promise<number> {
  let deleted = 0;
  for (;;) {
    const n = await store.pruneFinishedTasks(before, TASK_PRUNE_PIECE);
    deleted += n;
    if (n < TASK_PRUNE_PIECE || stopped()) return deleted;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

// Keeps finished tasks to their retention period. Every node pool create, update and delete and every vApp
// instantiation stores a task, which ListTasks would otherwise list, and the store keep, forever. The contract says
// nothing of how long tasks live; Google's long-running operations and VMware Cloud Director's task history both
// expire, so a caller polls a task while it runs and for a while after, not for ever. Counted from when the task
// finished; an unfinished task is never deleted (docs/node-pools.md). Runs at start and then at every interval. A
// retention of 0 keeps every task.
export class TaskRetention {
  private readonly periodic: PeriodicRun;
  private stopping = false;

  constructor(
    private readonly stores: { nodePools: FinishedTaskPruning; vapps: FinishedTaskPruning },
    private readonly clock: Clock,
    private readonly retentionMs: number,
    intervalMs: number,
    private readonly logger: Logger,
  ) {
    this.periodic = new PeriodicRun(intervalMs, () => this.run());
  }

  start(): void {
    if (this.retentionMs === 0) return;
    void this.periodic.runOnce();
    this.periodic.start();
  }

  // Deletes what is past the retention now; with a retention of 0 (keep forever), nothing.
  runOnce(): Promise<void> {
    if (this.retentionMs === 0) return Promise.resolve();
    return this.periodic.runOnce();
  }

  private async run(): Promise<void> {
    const before = this.clock.now() - this.retentionMs;
    const stopped = (): boolean => this.stopping;
    try {
      const nodePoolTasks = await pruneFinishedTasks(this.stores.nodePools, before, stopped);
      const vappTasks = stopped() ? 0 : await pruneFinishedTasks(this.stores.vapps, before, stopped);
      if (nodePoolTasks + vappTasks > 0) {
        this.logger.info({ nodePoolTasks, vappTasks, before: new Date(before).toISOString() }, "deleted finished tasks older than the retention period");
      }
    } catch (err) {
      this.logger.error({ err }, "deleting old finished tasks failed; retrying at the next interval");
    }
  }

  stop(): Promise<void> {
    this.stopping = true;
    return this.periodic.stop();
  }
}
