import { randomBytes } from "node:crypto";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { masterKeyCheck } from "../../src/kms/master-key-check.js";
import { MasterKey } from "../../src/kms/master-key.js";
import { SCHEMA_VERSIONS as PG_SCHEMA_VERSIONS } from "../../src/storage/postgres/migrations.js";
import { SCHEMA_VERSIONS } from "../../src/storage/sqlite/migrations.js";
import { sealSome, startExpectingRefusal } from "../support/master-key-processes.js";
import { createDatabase, postgresAvailable } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";
import { runAdminCli } from "../support/principals.js";
import { spawnServer } from "../support/server.js";
import { storeSnapshot } from "../support/store-snapshot.js";
import { tempDir } from "../support/temp-dir.js";

// Which builds may use a store (src/storage/schema-version.ts, docs/storage.md "Upgrading"): only a server upgrades
// one, a store a newer build upgraded is refused, and a refusal changes nothing. A probe (2026-11-28) found an
// operator command of a newer checkout upgrading the store under an older server still running on it, a build
// serving a store of a newer one without a word, a wrong master key refused only after every pending migration had
// run, and a new server starting beside an older one that held no lock of the data directory.

const NEWEST = Math.max(...SCHEMA_VERSIONS);
const PG_NEWEST = Math.max(...PG_SCHEMA_VERSIONS);
// The embedded store's last migration is repeatable (an UPDATE that finds nothing to change), so taking its row away
// is a store as the build before it left it.
const older = `DELETE FROM schema_migrations WHERE version = ${NEWEST}`;
const newer = (newest: number): string => `INSERT INTO schema_migrations (version, applied_at) VALUES (${newest + 1}, 0)`;

const key = Buffer.alloc(32, 7).toString("base64");
const keyIdOf = (base64: string): string => masterKeyCheck(new MasterKey(Buffer.from(base64, "base64"))).keyId;

const outdated = (current: number, newest: number): string =>
  `cloudplane-admin: the store is at schema version ${current} and this build's is ${newest}: start this build's server on it first, which ` +
  "upgrades it (stop every server of an older build before), then run the command again. Nothing was changed\n";
const tooNew = (newest: number): string =>
  `the store was upgraded by a newer build of cloudplane (schema version ${newest + 1}; this build knows versions up to ${newest}): ` +
  "run that build or a newer one. Nothing was changed";

describe("an embedded store", () => {
  const dir = tempDir();
  const dataDir = join(dir.path, "data");
  const sqlite = (sql: string): void => {
    const db = new Database(join(dataDir, "cloudplane.db"));
    db.exec(sql);
    db.close();
  };
  const env = { MASTER_KEY: key, DATABASE_URL: "" };

  beforeAll(async () => {
    const server = await spawnServer({ dataDir, env });
    await sealSome(server.url, 2);
    await server.kill("SIGTERM");
  });
  afterAll(() => dir.remove());

  it("an older build left is refused by the operator commands, and upgraded by the server alone", async () => {
    sqlite(older);
    const before = storeSnapshot(dataDir);
    for (const args of [["accounts", "list"], ["audit"], ["accounts", "create", "app"]]) {
      expect(await runAdminCli(dataDir, args, env)).toEqual({ exitCode: 1, stdout: "", stderr: outdated(NEWEST - 1, NEWEST) });
    }
    expect(storeSnapshot(dataDir)).toEqual(before);

    const server = await spawnServer({ dataDir, env });
    await server.kill("SIGTERM");
    expect((await runAdminCli(dataDir, ["accounts", "list"], env)).exitCode).toBe(0);
  });

  it("a newer build upgraded is refused by the server and the commands, changing nothing", async () => {
    sqlite(newer(NEWEST));
    try {
      const before = storeSnapshot(dataDir);
      const refused = await startExpectingRefusal(dataDir, env);
      expect({ code: refused.code, stderr: refused.stderr }).toEqual({ code: 1, stderr: `cloudplane failed to start: ${tooNew(NEWEST)}\n` });
      expect(await runAdminCli(dataDir, ["accounts", "list"], env)).toEqual({ exitCode: 1, stdout: "", stderr: `cloudplane-admin: ${tooNew(NEWEST)}\n` });
      expect(storeSnapshot(dataDir)).toEqual(before);
    } finally {
      sqlite(`DELETE FROM schema_migrations WHERE version = ${NEWEST + 1}`);
    }
  });

  it("refuses another master key before it upgrades the store: nothing was changed, as the message says", async () => {
    sqlite(older);
    const before = storeSnapshot(dataDir);
    const wrong = randomBytes(32).toString("base64");
    const refused = await startExpectingRefusal(dataDir, { ...env, MASTER_KEY: wrong });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`the master key from MASTER_KEY (key id ${keyIdOf(wrong)}) does not match`);
    expect(refused.stderr).toContain(`(key id ${keyIdOf(key)}, from the check value stored with the data); nothing was changed.`);
    expect(storeSnapshot(dataDir)).toEqual(before);
  });

  it("refuses to start while another process has the database open, as a server of a build without the lock does", async () => {
    const held = new Database(join(dataDir, "cloudplane.db"), { readonly: true });
    try {
      held.prepare("SELECT count(*) FROM kms_keys").get();
      const refused = await startExpectingRefusal(dataDir, env);
      expect({ code: refused.code, stderr: refused.stderr }).toEqual({
        code: 2,
        stderr:
          `cloudplane failed to start: ${join(dataDir, "cloudplane.db")} is open in another process: an operator command (npm run ` +
          "rewrap-master-key, cloudplane-admin), or a cloudplane server of an older build, which holds no cloudplane.lock. Wait for " +
          "the command to finish, or stop that server, then start again\n",
      });
    } finally {
      held.close();
    }
    await (await spawnServer({ dataDir, env })).kill("SIGTERM");
  });
});

describe.runIf(await postgresAvailable())("a PostgreSQL database", () => {
  const dir = tempDir();
  let database: TestDatabase;
  let env: Record<string, string>;
  const query = async <T extends pg.QueryResultRow>(sql: string): Promise<T[]> => {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      return (await client.query<T>(sql)).rows;
    } finally {
      await client.end();
    }
  };
  const versions = async (): Promise<number[]> => (await query<{ version: number }>("SELECT version FROM schema_migrations ORDER BY version")).map((r) => r.version);

  beforeAll(async () => {
    database = await createDatabase();
    env = { MASTER_KEY: key, DATABASE_URL: database.url };
    const server = await spawnServer({ dataDir: join(dir.path, "a"), env });
    await sealSome(server.url, 2);
    await server.kill("SIGTERM");
  });
  afterAll(async () => {
    await database?.drop();
    dir.remove();
  });

  it("an older build left is refused by the operator commands, and a wrong master key before any upgrade", async () => {
    // The database as the build before migration 11 left it.
    expect(PG_NEWEST).toBe(11);
    await query("DROP INDEX audit_batches_by_first; DELETE FROM schema_migrations WHERE version = 11");
    expect(await runAdminCli(join(dir.path, "a"), ["accounts", "list"], env)).toEqual({ exitCode: 1, stdout: "", stderr: outdated(10, PG_NEWEST) });
    const wrong = randomBytes(32).toString("base64");
    const refused = await startExpectingRefusal(join(dir.path, "b"), { ...env, MASTER_KEY: wrong });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`does not match the one the database of DATABASE_URL was written with (key id ${keyIdOf(key)}`);
    expect(await versions()).toEqual(PG_SCHEMA_VERSIONS.filter((v) => v !== 11));

    await (await spawnServer({ dataDir: join(dir.path, "a"), env })).kill("SIGTERM");
    expect(await versions()).toEqual(PG_SCHEMA_VERSIONS);
  });

  it("a newer build upgraded is refused by the server and the commands", async () => {
    await query(newer(PG_NEWEST));
    try {
      const refused = await startExpectingRefusal(join(dir.path, "a"), env);
      expect({ code: refused.code, stderr: refused.stderr }).toEqual({ code: 1, stderr: `cloudplane failed to start: ${tooNew(PG_NEWEST)}\n` });
      expect(await runAdminCli(join(dir.path, "a"), ["accounts", "list"], env)).toEqual({ exitCode: 1, stdout: "", stderr: `cloudplane-admin: ${tooNew(PG_NEWEST)}\n` });
    } finally {
      await query(`DELETE FROM schema_migrations WHERE version = ${PG_NEWEST + 1}`);
    }
  });
});
