import type { Logger } from "pino";
import { failureLevel } from "../errors/store-unavailable.js";
import type { Clock } from "../shared/clock.js";
import { Retention, pruneInPieces } from "../shared/retention.js";
import type { AuditStore } from "../storage/identity-store.js";

// Batches deleted by one statement. A batch holds up to 32 records of about 60 bytes (audit-batch.ts), so a
// piece is about 1 MB of the trail, deleted in 0.5-0.8 ms on the embedded store (docs/access.md); calls run in
// between pieces, so a backlog of months never holds the event loop for long.
export const PRUNE_PIECE = 500;

// Deletes every batch of the trail whose records are all older than `before`, a piece at a time, and returns how
// many batches it deleted. `stopped` is asked between pieces, so that a shutdown does not wait for a long backlog.
export function pruneAuditTrail(store: AuditStore, before: number, stopped: () => boolean = () => false): Promise<number> {
  return pruneInPieces((limit) => store.prune(before, limit), PRUNE_PIECE, stopped);
}

// Keeps the audit trail to its retention period. Every KMS call adds a record (about 60 bytes), so a server under
// steady load would otherwise fill its disk (about 1 GB an hour at 4,800 calls a second). Runs at start and then
// at every interval. A retention of 0 keeps the trail forever.
export class AuditRetention extends Retention {
  constructor(store: AuditStore, clock: Clock, retentionMs: number, intervalMs: number, logger: Logger) {
    super(clock, retentionMs, intervalMs, async (before, stopped) => {
      try {
        const batches = await pruneAuditTrail(store, before, stopped);
        if (batches > 0) logger.info({ batches, before: new Date(before).toISOString() }, "deleted audit records older than the retention period");
      } catch (err) {
        logger[failureLevel(err)]({ err }, "deleting old audit records failed; retrying at the next interval");
      }
    });
  }
}
