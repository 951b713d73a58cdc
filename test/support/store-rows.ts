import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";

// Rows of a test server's store, read through a connection of the test's own, whichever backend the server runs
// on. `sql` takes `?` placeholders and must mean the same in SQLite and PostgreSQL.
export async function storeRows<T>(server: { dataDir: string; databaseUrl: string | null }, sql: string, params: unknown[] = []): Promise<T[]> {
  if (server.databaseUrl === null) {
    const db = new Database(join(server.dataDir, "cloudplane.db"), { readonly: true, fileMustExist: true });
    try {
      return db.prepare(sql).all(...params) as T[];
    } finally {
      db.close();
    }
  }
  let n = 0;
  const client = new pg.Client({ connectionString: server.databaseUrl });
  await client.connect();
  try {
    return (await client.query(sql.replace(/\?/g, () => `$${++n}`), params)).rows as T[];
  } finally {
    await client.end();
  }
}
