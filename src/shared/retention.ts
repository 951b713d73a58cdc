import type { Clock } from "./clock.js";
import { PeriodicRun } from "./periodic-run.js";

// Deletes in pieces: `prune(limit)` deletes at most `limit` rows and says how many it did. Pieces follow one another
// until one comes back short, or until `stopped()` (a shutdown does not wait for a long backlog), with the event
// loop free in between, so that calls run between pieces. Returns how many rows it deleted in all.
export async function pruneInPieces(prune: (limit: number) => Promise<number>, piece: number, stopped: () => boolean): Promise<number> {
  let deleted = 0;
  for (;;) {
    const n = await prune(piece);
    deleted += n;
    if (n < piece || stopped()) return deleted;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

// Keeps stored data to a retention period: `prune(before, stopped)` deletes what is older than `before`, at start
// and then at every interval, and must not throw (it logs its own failures; the next interval tries again). A
// retention of 0 keeps everything. The audit trail's retention and the finished tasks' are each one of these.
export class Retention {
  private readonly periodic: PeriodicRun;
  private stopping = false;

  constructor(
    clock: Clock,
    private readonly retentionMs: number,
    intervalMs: number,
    prune: (before: number, stopped: () => boolean) => Promise<void>,
  ) {
    this.periodic = new PeriodicRun(intervalMs, () => prune(clock.now() - retentionMs, () => this.stopping));
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

  stop(): Promise<void> {
    this.stopping = true;
    return this.periodic.stop();
  }
}
