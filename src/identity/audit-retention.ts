import type { Logger } from "pino";
import type { Clock } from "../shared/clock.js";
import { PeriodicRun } from "../shared/periodic-run.js";
import type { AuditStore } from "../storage/identity-store.js";

// Batches deleted by one statement. A batch holds up to 32 records of about 60 bytes (audit-batch.ts), so a
// piece is about 1 MB of the trail, deleted in 0.5-0.8 ms on the embedded store (docs/access.md); calls run in
// between pieces, so a backlog of months never holds the event loop for long.
export const PRUNE_PIECE = 500;

// Deletes every batch of the trail whose records are all older than `before`, a piece at a time, and returns how
// many batches it deleted. `stopped` is asked between pieces, so that a shutdown does not wait for a long backlog.
export async function pruneAuditTrail(store: AuditStore, before: number, stopped: () => boolean = () => false): Promise<number> {
  let deleted = 0;
  for (;;) {
    const n = await store.prune(before, PRUNE_PIECE);
    deleted += n;
    if (n < PRUNE_PIECE || stopped()) return deleted;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

// Keeps the audit trail to its retention period. Every KMS call adds a record (about 60 bytes), so a server under
// steady load would otherwise fill its disk (about 1 GB an hour at 4,800 calls a second). Runs at start and then
// at every interval. A retention of 0 keeps the trail forever.
export class AuditRetention {
  private readonly periodic: PeriodicRun;
  private stopping = false;

  constructor(
    private readonly store: AuditStore,
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
    try {
      const batches = await pruneAuditTrail(this.store, before, () => this.stopping);
      if (batches > 0) this.logger.info({ batches, before: new Date(before).toISOString() }, "deleted audit records older than the retention period");
    } catch (err) {
      this.logger.error({ err }, "deleting old audit records failed; retrying at the next interval");
    }
  }

  stop(): Promise<void> {
    this.stopping = true;
    return this.periodic.stop();
  }
}
