import type Database from "better-sqlite3";
import { ANY_WRAPPED_MATERIAL_SQL, MASTER_KEY_CHECK_SQL, masterKeyCheckFromRow, wrappedFromRow } from "../rows.js";
import type { MasterKeyRow, WrappedRow } from "../rows.js";
import type { MasterKeyReader } from "../storage.js";

const hasTable = (db: Database.Database, name: string): boolean =>
  db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined;

// The master key's binding as a store of any schema holds it: none before the migration that added the check value
// (3), and no material in a new, empty database.
export function sqliteMasterKeyReader(db: Database.Database): MasterKeyReader {
  return {
    async readMasterKeyCheck() {
      if (!hasTable(db, "kms_master_key")) return null;
      const row = db.prepare(MASTER_KEY_CHECK_SQL).get() as MasterKeyRow | undefined;
      return row === undefined ? null : masterKeyCheckFromRow(row);
    },
    async anyWrappedMaterial() {
      if (!hasTable(db, "kms_versions")) return null;
      const row = db.prepare(ANY_WRAPPED_MATERIAL_SQL).get() as WrappedRow | undefined;
      return row === undefined ? null : wrappedFromRow(row);
    },
  };
}
