import type { Logger } from "pino";
import type { AuditStore } from "../storage/identity-store.js";
import { LogBudget } from "../shared/log-budget.js";
import type { AuditRecord } from "./identity-model.js";

// A batch is stored once it holds this many records, without waiting for the end of the turn. Under load a turn
// reads about 125 calls, and answering all of them at its end piled their responses up at once (8 MB at 64 KiB):
// stored by 32, they go out while the turn is still reading, for 4-11% more 64 KiB Encrypts and Decrypts a second
// and no change at 1 KiB, where the extra commits cost about what the native time saved (bench/README.md). Batches of
// 128 cut the commits' share of a loaded server's CPU from 3.5% to 2.1% on a VM where a commit costs 75 µs, but 128
// large answers released at once by one commit made the hostile test of answers nobody reads fail one run in three
// (its session was not closed in time): kept at 32 (bench/README.md, "A commit of the audit trail", 2026-11-28).
export const MAX_BATCH = 32;

// Appends the audit records of calls in batches: the records of one turn of the event loop, MAX_BATCH at most, go
// into the store in one transaction (a transaction per record would cost more than an Encrypt), and every call of
// the batch waits for it, so that a record that cannot be stored fails its call instead of being lost quietly.
export class AuditTrail {
  private pending: AuditRecord[] = [];
  private batch: Promise<void> | null = null;
  private settle: { resolve: () => void; reject: (err: unknown) => void } | null = null;
  // A line a failed batch wrote 2.5 MB of error log in 10 s on a full disk (a probe, 2026-11-28).
  private readonly failureNotices = new LogBudget(10);

  constructor(
    private readonly store: AuditStore,
    private readonly logger: Logger,
  ) {}

  // Resolves once the record is stored; rejects when it could not be.
  append(record: AuditRecord): Promise<void> {
    this.pending.push(record);
    if (this.batch === null) {
      this.batch = new Promise<void>((resolve, reject) => {
        this.settle = { resolve, reject };
      });
      setImmediate(() => void this.flush());
    }
    const batch = this.batch;
    if (this.pending.length >= MAX_BATCH) void this.flush();
    return batch;
  }

  // Stores what is pending now (also at shutdown, so that no answered call goes unrecorded).
  async flush(): Promise<void> {
    const records = this.pending;
    const settle = this.settle;
    this.pending = [];
    this.batch = null;
    this.settle = null;
    if (settle === null) return;
    try {
      await this.store.append(records);
      settle.resolve();
    } catch (err) {
      if (this.failureNotices.take()) {
        this.logger.error({ err, records: records.length }, "could not append to the audit trail; the calls fail (at most 10 such lines a minute)");
      }
      settle.reject(err);
    }
  }
}
