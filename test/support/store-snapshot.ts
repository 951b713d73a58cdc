import { join } from "node:path";
import Database from "better-sqlite3";

// Every row of every table of a data directory's SQLite file, schema included, read through a connection of its
// own. Two equal snapshots around a call prove the call committed nothing, whatever table it might have touched.
export type StoreSnapshot = Record<string, unknown[]>;

export function storeSnapshot(dataDir: string): StoreSnapshot {
  const db = new Database(join(dataDir, "cloudplane.db"), { readonly: true, fileMustExist: true });
  try {
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all() as string[];
    const snapshot: StoreSnapshot = { sqlite_master: db.prepare("SELECT * FROM sqlite_master ORDER BY name").all() };
    for (const table of tables) snapshot[table] = db.prepare(`SELECT * FROM "${table}" ORDER BY rowid`).all();
    return snapshot;
  } finally {
    db.close();
  }
}
