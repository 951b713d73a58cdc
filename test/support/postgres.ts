import { randomBytes } from "node:crypto";
import pg from "pg";

// PostgreSQL for the tests: a database of its own per test file, made on the server CLOUDPLANE_TEST_DATABASE_URL
// names (default: the machine's local PostgreSQL, as .ci/run prepares it) and dropped after. The URL's user must
// be allowed to create databases.
export const adminDatabaseUrl = process.env.CLOUDPLANE_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

// Whether the tests can reach PostgreSQL; when not, say so once, loudly, and skip what needs it. CI requires it
// (CLOUDPLANE_REQUIRE_POSTGRES=1 in .ci/run): there a database that cannot be reached fails the run instead.
export async function postgresAvailable(): Promise<boolean> {
  const client = new pg.Client({ connectionString: adminDatabaseUrl, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    return true;
  } catch (err) {
    if (process.env.CLOUDPLANE_REQUIRE_POSTGRES === "1") throw new Error(`PostgreSQL at ${adminDatabaseUrl} is required but unreachable`, { cause: err });
    process.stderr.write(`\nSKIPPED the PostgreSQL tests: no PostgreSQL at ${adminDatabaseUrl} (${(err as Error).message}); set CLOUDPLANE_TEST_DATABASE_URL\n\n`);
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

async function admin<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

// A new, empty database on the server of `on` (default adminDatabaseUrl); drop() removes it with whatever
// connections are still open to it.
export async function createDatabase(on = adminDatabaseUrl): Promise<TestDatabase> {
  const name = `cloudplane_test_${randomBytes(6).toString("hex")}`;
  await admin(on, (c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(on);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => admin(on, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => {}),
  };
}
