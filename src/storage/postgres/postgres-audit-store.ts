import type pg from "pg";
import type { AuditFilter, AuditRecord } from "../../identity/identity-model.js";
import { encodeBatch, selectRecords } from "../audit-batch.js";
import type { AuditBatchRow } from "../audit-batch.js";
import type { AuditStore } from "../identity-store.js";
import { rows } from "./sql.js";

// How many batches a query reads from the database at a time: it stops at its limit.
const BATCHES_PER_READ = 500;

// The audit trail in PostgreSQL, a batch to a row (audit-batch.ts): a batch of the trail (audit-trail.ts) is one
// INSERT of one row, committed before the calls it records are answered.
export class PostgresAuditStore implements AuditStore {
  constructor(private readonly pool: pg.Pool) {}

  async append(records: readonly AuditRecord[]): Promise<void> {
    if (records.length === 0) return;
    const row = encodeBatch(records);
    await this.pool.query("INSERT INTO audit_batches (first_at, last_at, records) VALUES ($1, $2, $3)", [row.first_at, row.last_at, row.records]);
  }

  async query(filter: AuditFilter): Promise<AuditRecord[]> {
    const found: AuditRecord[] = [];
    for (let after = 0; found.length < filter.limit; ) {
      const batches = await rows<Pick<AuditBatchRow, "records"> & { seq: string }>(
        this.pool,
        `SELECT seq, records FROM audit_batches
          WHERE seq > $1 AND ($2::bigint IS NULL OR last_at >= $2) AND ($3::bigint IS NULL OR first_at < $3)
          ORDER BY seq LIMIT ${BATCHES_PER_READ}`,
        [after, filter.since ?? null, filter.until ?? null],
      );
      found.push(...selectRecords(batches, { ...filter, limit: filter.limit - found.length }));
      if (batches.length < BATCHES_PER_READ) break;
      after = Number(batches[batches.length - 1]!.seq);
    }
    return found;
  }

  async prune(before: number, limit: number): Promise<number> {
    const result = await this.pool.query(
      "DELETE FROM audit_batches WHERE seq IN (SELECT seq FROM audit_batches WHERE last_at < $1 ORDER BY last_at LIMIT $2)",
      [before, limit],
    );
    return result.rowCount ?? 0;
  }
}
