import type pg from "pg";
import type { AuditFilter, AuditRecord } from "../../identity/identity-model.js";
import { OldestFirst, encodeBatch } from "../audit-batch.js";
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

  // Batches in the order of their earliest record (first_at), since several servers append at once, through the index
  // on (first_at, seq) of migration 11, a page of them at a time, until the limit is met (OldestFirst).
  async query(filter: AuditFilter): Promise<AuditRecord[]> {
    const oldest = new OldestFirst(filter);
    if (filter.limit <= 0) return oldest.records;
    let after: { firstAt: number; seq: number } | null = null;
    while (!oldest.full) {
      const batches: (Pick<AuditBatchRow, "records" | "first_at"> & { seq: number })[] = await rows(
        this.pool,
        `SELECT seq, first_at, records FROM audit_batches
          WHERE ($1::bigint IS NULL OR (first_at, seq) > ($1, $2)) AND ($3::bigint IS NULL OR last_at >= $3) AND ($4::bigint IS NULL OR first_at < $4)
          ORDER BY first_at, seq LIMIT ${BATCHES_PER_READ}`,
        [after?.firstAt ?? null, after?.seq ?? null, filter.since ?? null, filter.until ?? null],
      );
      const last = batches[batches.length - 1];
      const more = batches.length === BATCHES_PER_READ && last !== undefined;
      oldest.add(batches, more ? last.first_at : undefined);
      if (!more) break;
      after = { firstAt: last.first_at, seq: Number(last.seq) };
    }
    return oldest.records;
  }

  async prune(before: number, limit: number): Promise<number> {
    const result = await this.pool.query(
      "DELETE FROM audit_batches WHERE seq IN (SELECT seq FROM audit_batches WHERE last_at < $1 ORDER BY last_at LIMIT $2)",
      [before, limit],
    );
    return result.rowCount ?? 0;
  }
}
