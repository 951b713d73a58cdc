import type Database from "better-sqlite3";
import type { AuditFilter, AuditRecord } from "../../identity/identity-model.js";
import type { AuditStore } from "../identity-store.js";
import { auditFromRow, auditParams } from "../rows.js";
import type { AuditRow } from "../rows.js";

// The audit trail in the embedded database, through a connection of its own with synchronous=NORMAL: a batch is
// in the write-ahead log when append returns, so it survives a crash of the server (kill -9), and it reaches the
// disk with the next fully synchronous commit of the key or task data or at the next checkpoint. Waiting for the
// disk on every batch would cost ~150 µs of the event loop each time (measured in docs/access.md).
export class SqliteAuditStore implements AuditStore {
  private readonly insert: Database.Statement;
  private readonly insertAll: (records: readonly AuditRecord[]) => void;

  constructor(private readonly db: Database.Database) {
    this.insert = db.prepare(
      "INSERT INTO audit_records (at, principal, method, protocol, scope, resource, code, request_id) VALUES (@at, @principal, @method, @protocol, @scope, @resource, @code, @request_id)",
    );
    this.insertAll = db.transaction((records: readonly AuditRecord[]) => {
      for (const r of records) this.insert.run(auditParams(r));
    });
  }

  async append(records: readonly AuditRecord[]): Promise<void> {
    this.insertAll(records);
  }

  async query(filter: AuditFilter): Promise<AuditRecord[]> {
    const where: string[] = [];
    const params: (string | number)[] = [];
    if (filter.since !== undefined) {
      where.push("at >= ?");
      params.push(filter.since);
    }
    if (filter.until !== undefined) {
      where.push("at < ?");
      params.push(filter.until);
    }
    if (filter.principal !== undefined) {
      where.push("principal = ?");
      params.push(filter.principal);
    }
    if (filter.resource !== undefined) {
      // A scope, or a resource path and everything under it.
      where.push("(scope = ? OR resource = ? OR substr(resource, 1, length(?) + 1) = ? || '/')");
      params.push(filter.resource, filter.resource, filter.resource, filter.resource);
    }
    const sql = `SELECT * FROM audit_records ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY seq LIMIT ?`;
    params.push(filter.limit);
    return (this.db.prepare(sql).all(...params) as AuditRow[]).map(auditFromRow);
  }
}
