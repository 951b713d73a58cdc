import type { Logger } from "pino";
import { failureLevel } from "../../errors/store-unavailable.js";
import type { Clock } from "../../shared/clock.js";
import { Retention, pruneInPieces } from "../../shared/retention.js";
import type { FinishedTaskPruning } from "../../storage/task-queue.js";

// Tasks deleted by one statement. A task row is under 1 KB (a node pool task holds the pool as it left it), so a
// piece is well under a megabyte, and calls run in between pieces: a backlog of months never holds the event loop
// for long.
export const TASK_PRUNE_PIECE = 500;

// Deletes every finished task of one store that finished before `before`, a piece at a time, and returns how many it
// deleted. `stopped` is asked between pieces, so that a shutdown does not wait for a long backlog.
export function pruneFinishedTasks(store: FinishedTaskPruning, before: number, stopped: () => boolean = () => false): Promise<number> {
  return pruneInPieces((limit) => store.pruneFinishedTasks(before, limit), TASK_PRUNE_PIECE, stopped);
}

// Keeps finished tasks to their retention period. Every node pool create, update and delete and every vApp
// instantiation stores a task, which ListTasks would otherwise list, and the store keep, forever. The contract says
// nothing of how long tasks live; Google's long-running operations and VMware Cloud Director's task history both
// expire, so a caller polls a task while it runs and for a while after, not for ever. Counted from when the task
// finished; an unfinished task is never deleted (docs/node-pools.md). Runs at start and then at every interval. A
// retention of 0 keeps every task.
export class TaskRetention extends Retention {
  constructor(stores: { nodePools: FinishedTaskPruning; vapps: FinishedTaskPruning }, clock: Clock, retentionMs: number, intervalMs: number, logger: Logger) {
    super(clock, retentionMs, intervalMs, async (before, stopped) => {
      try {
        const nodePoolTasks = await pruneFinishedTasks(stores.nodePools, before, stopped);
        const vappTasks = stopped() ? 0 : await pruneFinishedTasks(stores.vapps, before, stopped);
        if (nodePoolTasks + vappTasks > 0) {
          logger.info({ nodePoolTasks, vappTasks, before: new Date(before).toISOString() }, "deleted finished tasks older than the retention period");
        }
      } catch (err) {
        logger[failureLevel(err)]({ err }, "deleting old finished tasks failed; retrying at the next interval");
      }
    });
  }
}
