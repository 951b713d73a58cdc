import type Database from "better-sqlite3";
import type { AuditFilter, AuditRecord } from "../../identity/identity-model.js";
import { encodeBatch, selectRecords } from "../audit-batch.js";
import type { AuditBatchRow } from "../audit-batch.js";
import type { AuditStore } from "../identity-store.js";

// The audit trail in the embedded database, a batch to a row (audit-batch.ts), through a connection of its own
// with synchronous=NORMAL: a batch is in the write-ahead log when append returns, so it survives a crash of the
// server (kill -9), and it reaches the disk with the next fully synchronous commit of the key or task data or at
// the next checkpoint. Waiting for the disk on every batch would cost ~150 µs of the event loop each time
// (measured in docs/access.md).
export class SqliteAuditStore implements AuditStore {
  private readonly insert: Database.Statement;
  private readonly deleteOld: Database.Statement;

  constructor(private readonly db: Database.Database) {
    this.insert = db.prepare("INSERT INTO audit_batches (first_at, last_at, records) VALUES (?, ?, ?)");
    // Through the index on last_at: a prune that finds nothing to delete reads one index entry.
    this.deleteOld = db.prepare(
      "DELETE FROM audit_batches WHERE seq IN (SELECT seq FROM audit_batches WHERE last_at < ? ORDER BY last_at LIMIT ?)",
    );
  }

  async append(records: readonly AuditRecord[]): Promise<void> {
    if (records.length === 0) return;
    const row = encodeBatch(records);
    this.insert.run(row.first_at, row.last_at, row.records);
  }

  async query(filter: AuditFilter): Promise<AuditRecord[]> {
    const where: string[] = [];
    const params: number[] = [];
    if (filter.since !== undefined) {
      where.push("last_at >= ?");
      params.push(filter.since);
    }
    if (filter.until !== undefined) {
      where.push("first_at < ?");
      params.push(filter.until);
    }
    const sql = `SELECT records FROM audit_batches ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY seq`;
    // Iterated, so that a query stops reading at its limit.
    return selectRecords(this.db.prepare(sql).iterate(...params) as Iterable<Pick<AuditBatchRow, "records">>, filter);
  }

  async prune(before: number, limit: number): Promise<number> {
    return this.deleteOld.run(before, limit).changes;
  }
}
