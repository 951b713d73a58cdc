import { ANY_WRAPPED_MATERIAL_SQL, MASTER_KEY_CHECK_SQL, masterKeyCheckFromRow, wrappedFromRow } from "../rows.js";
import type { MasterKeyRow, WrappedRow } from "../rows.js";
import type { MasterKeyReader } from "../storage.js";
import { first, hasTable } from "./sql.js";
import type { Queryable } from "./sql.js";

// The master key's binding as a database of any schema holds it: none before the migration that added the check
// value (3), and no material in a new, empty database.
export function postgresMasterKeyReader(client: Queryable): MasterKeyReader {
  return {
    async readMasterKeyCheck() {
      if (!(await hasTable(client, "kms_master_key"))) return null;
      const row = await first<MasterKeyRow>(client, MASTER_KEY_CHECK_SQL);
      return row === null ? null : masterKeyCheckFromRow(row);
    },
    async anyWrappedMaterial() {
      if (!(await hasTable(client, "kms_versions"))) return null;
      const row = await first<WrappedRow>(client, ANY_WRAPPED_MATERIAL_SQL);
      return row === null ? null : wrappedFromRow(row);
    },
  };
}
