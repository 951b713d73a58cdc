import type pg from "pg";
import type { AuditFilter, AuditRecord } from "../../identity/identity-model.js";
import type { AuditStore } from "../identity-store.js";
import { auditFromRow, auditParams } from "../rows.js";
import type { AuditRow } from "../rows.js";
import { rows, transaction } from "./sql.js";
import type { Queryable } from "./sql.js";

const COLUMNS = ["at", "principal", "method", "protocol", "scope", "resource", "code", "request_id"] as const;
// A statement takes at most 65,535 parameters; a larger batch is several INSERTs in one transaction.
const ROWS_PER_INSERT = 1000;

// The audit trail in PostgreSQL: a batch (audit-trail.ts) is one INSERT of many rows, committed before the calls it
// records are answered.
export class PostgresAuditStore implements AuditStore {
  constructor(private readonly pool: pg.Pool) {}

  async append(records: readonly AuditRecord[]): Promise<void> {
    if (records.length <= ROWS_PER_INSERT) return this.insert(this.pool, records);
    await transaction(this.pool, async (client) => {
      for (let i = 0; i < records.length; i += ROWS_PER_INSERT) await this.insert(client, records.slice(i, i + ROWS_PER_INSERT));
    });
  }

  private async insert(db: Queryable, records: readonly AuditRecord[]): Promise<void> {
    if (records.length === 0) return;
    const values: unknown[] = [];
    const tuples = records.map((r) => {
      const row = auditParams(r);
      const start = values.length;
      for (const c of COLUMNS) values.push(row[c]);
      return `(${COLUMNS.map((_, i) => `$${start + i + 1}`).join(", ")})`;
    });
    await db.query(`INSERT INTO audit_records (${COLUMNS.join(", ")}) VALUES ${tuples.join(", ")}`, values);
  }

  async query(filter: AuditFilter): Promise<AuditRecord[]> {
    const where: string[] = [];
    const params: (string | number)[] = [];
    const param = (value: string | number): string => {
      params.push(value);
      return `$${params.length}`;
    };
    if (filter.since !== undefined) where.push(`at >= ${param(filter.since)}`);
    if (filter.until !== undefined) where.push(`at < ${param(filter.until)}`);
    if (filter.principal !== undefined) where.push(`principal = ${param(filter.principal)}`);
    if (filter.resource !== undefined) {
      // A scope, or a resource path and everything under it.
      const r = param(filter.resource);
      where.push(`(scope = ${r} OR resource = ${r} OR left(resource, length(${r}) + 1) = ${r} || '/')`);
    }
    const sql = `SELECT * FROM audit_records ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY seq LIMIT ${param(filter.limit)}`;
    return (await rows<AuditRow>(this.pool, sql, params)).map(auditFromRow);
  }
}
