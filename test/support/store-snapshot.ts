import { join } from "node:path";
import Database from "better-sqlite3";
import { decodeBatch } from "../../src/storage/audit-batch.js";

// Every row of every table of a data directory's SQLite file, schema included, read through a connection of its
// own. Two equal snapshots around a call prove the call committed nothing, whatever table it might have touched.
export type StoreSnapshot = Record<string, unknown[]>;

// The audit trail grows by one record with every KMS call and every mutation, refused or not
// (src/pipeline/stages/audit.ts): a refused call commits nothing else. Tests of such calls leave the table out of the
// snapshot with `except` and check its new records with auditRecords.
export const AUDIT_TABLE = "audit_batches";

export function storeSnapshot(dataDir: string, opts: { except?: readonly string[] } = {}): StoreSnapshot {
  const except = new Set(opts.except ?? []);
  const db = new Database(join(dataDir, "cloudplane.db"), { readonly: true, fileMustExist: true });
  try {
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all() as string[];
    const snapshot: StoreSnapshot = { sqlite_master: db.prepare("SELECT * FROM sqlite_master ORDER BY name").all() };
    for (const table of tables) if (!except.has(table)) snapshot[table] = db.prepare(`SELECT * FROM "${table}" ORDER BY rowid`).all();
    return snapshot;
  } finally {
    db.close();
  }
}

export interface AuditRow {
  seq: number;
  at: number;
  principal: string;
  method: string;
  protocol: string;
  scope: string;
  resource: string;
  code: number;
  request_id: string;
}

// The audit records stored so far, oldest first, numbered from 1 (src/storage/audit-batch.ts stores them a batch
// to a row).
export function auditRecords(dataDir: string): AuditRow[] {
  const batches = storeSnapshot(dataDir)[AUDIT_TABLE] as { records: string }[];
  return batches
    .flatMap((b) => decodeBatch(b.records))
    .map(({ requestId, ...r }, i) => ({ seq: i + 1, ...r, request_id: requestId }));
}
