import { existsSync, readFileSync, renameSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startExpectingRefusal } from "../support/master-key-processes.js";
import { createDatabase, postgresAvailable } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";
import { spawnServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";

// A store with no account beside the credentials file of an earlier admin (docs/access.md, "Bootstrap"): on 82d22ee
// a data directory whose cloudplane.db was moved away or truncated started on an empty store, and wrote a new secret
// over admin-credentials.json, losing the one that matches the backup of the database. Now the start is refused
// (exit 1), the file is kept, and the server starts again once the database is back or the file is moved away.

const ownLayout = { MASTER_KEY: "" };
const credentialsOf = (dataDir: string): string => readFileSync(join(dataDir, "admin-credentials.json"), "utf8");

function refusal(dataDir: string, restore: string): string {
  const file = join(dataDir, "admin-credentials.json");
  return (
    `cloudplane failed to start: the store has no admin account, but the data directory ${dataDir} holds ${file}, the ` +
    `credentials of an earlier one: the database was lost or replaced. To keep the data, ${restore}; to start afresh ` +
    `with an empty store, move ${file} away (a new admin account is then created)\n`
  );
}

describe("a data directory whose database was lost", () => {
  const dir = tempDir();
  const dataDir = join(dir.path, "data");
  const db = join(dataDir, "cloudplane.db");
  let credentials: string;
  let masterKey: string;

  beforeAll(async () => {
    const server = await spawnServer({ dataDir, env: ownLayout });
    await server.kill("SIGTERM");
    credentials = credentialsOf(dataDir);
    masterKey = readFileSync(join(dataDir, "master.key"), "utf8");
  });
  afterAll(() => dir.remove());

  const sqliteRefusal = (): string => refusal(dataDir, `restore ${db} from your backup`);

  it("refuses to start with cloudplane.db moved away, keeps the credentials, and starts with it back", async () => {
    renameSync(db, join(dir.path, "moved.db"));
    const refused = await startExpectingRefusal(dataDir, ownLayout);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(sqliteRefusal());
    expect(credentialsOf(dataDir)).toBe(credentials);
    expect(readFileSync(join(dataDir, "master.key"), "utf8")).toBe(masterKey);

    renameSync(join(dir.path, "moved.db"), db);
    // spawnServer logs in with the file: the credentials still match the store.
    await (await spawnServer({ dataDir, env: ownLayout })).kill("SIGTERM");
    expect(credentialsOf(dataDir)).toBe(credentials);
  });

  it("refuses to start with cloudplane.db truncated to 0 bytes", async () => {
    const saved = readFileSync(db);
    truncateSync(db, 0);
    const refused = await startExpectingRefusal(dataDir, ownLayout);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(sqliteRefusal());
    expect(credentialsOf(dataDir)).toBe(credentials);
    // What a restore does: the backup over the file.
    renameSync(db, join(dir.path, "empty.db"));
    writeFileSync(db, saved, { mode: 0o600 });
    await (await spawnServer({ dataDir, env: ownLayout })).kill("SIGTERM");
  });

  it("starts afresh with a new admin once the old credentials are moved away", async () => {
    renameSync(db, join(dir.path, "lost.db"));
    renameSync(join(dataDir, "admin-credentials.json"), join(dir.path, "old-credentials.json"));
    await (await spawnServer({ dataDir, env: ownLayout })).kill("SIGTERM");
    expect(credentialsOf(dataDir)).not.toBe(credentials);
    expect(readFileSync(join(dir.path, "old-credentials.json"), "utf8")).toBe(credentials);
  });

  it("a bootstrap interrupted before or after the account was stored leaves nothing that blocks the next start", async () => {
    const fresh = join(dir.path, "fresh");
    // Before: the staged file of an account never stored, beside an empty store.
    await (await spawnServer({ dataDir: fresh, env: ownLayout })).kill("SIGTERM");
    renameSync(join(fresh, "cloudplane.db"), join(dir.path, "fresh-lost.db"));
    renameSync(join(fresh, "admin-credentials.json"), join(fresh, "admin-credentials.json.new"));
    await (await spawnServer({ dataDir: fresh, env: ownLayout })).kill("SIGTERM");
    expect(existsSync(join(fresh, "admin-credentials.json.new"))).toBe(false);
    // After: the account stored, its file still staged; the next start puts it in place (spawnServer logs in with it).
    const stored = credentialsOf(fresh);
    renameSync(join(fresh, "admin-credentials.json"), join(fresh, "admin-credentials.json.new"));
    await (await spawnServer({ dataDir: fresh, env: ownLayout })).kill("SIGTERM");
    expect(credentialsOf(fresh)).toBe(stored);
    expect(existsSync(join(fresh, "admin-credentials.json.new"))).toBe(false);
  });
});

describe.runIf(await postgresAvailable())("a data directory reused with another PostgreSQL database", () => {
  const dir = tempDir();
  const databases: TestDatabase[] = [];
  afterAll(async () => {
    for (const database of databases) await database.drop();
    dir.remove();
  });

  it("refuses to start, keeping the credentials of the first database's admin", async () => {
    const [first, second] = [await createDatabase(), await createDatabase()];
    databases.push(first, second);
    const dataDir = join(dir.path, "a");
    const env = { MASTER_KEY: Buffer.alloc(32, 9).toString("base64") };
    await (await spawnServer({ dataDir, env: { ...env, DATABASE_URL: first.url } })).kill("SIGTERM");
    const credentials = credentialsOf(dataDir);

    const refused = await startExpectingRefusal(dataDir, { ...env, DATABASE_URL: second.url });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(refusal(dataDir, "point DATABASE_URL at the database the account is in, or restore it from your backup"));
    expect(credentialsOf(dataDir)).toBe(credentials);
  });
});
