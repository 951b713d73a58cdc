import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { openPostgresStorage } from "../../src/storage/postgres/postgres-storage.js";
import { createUnboundedClient } from "../../src/storage/postgres/sql.js";
import { logLines } from "../support/log-lines.js";
import { runAdminCli } from "../support/principals.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import type { TcpProxy } from "../support/tcp-proxy.js";
import { tempDir } from "../support/temp-dir.js";
import { createDatabase, postgresAvailable } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";

// The start-up lock of postgres-storage.ts ("cloudpln"), as a session that holds it sees it.
const STARTUP_LOCK = (0x636c6f7564706c6en).toString();

// A probe (2026-11-28): a server cut off from the database while it held the start-up lock kept it until PostgreSQL
// noticed, hours later; meanwhile every other server's start and every cloudplane-admin command waited without a
// word. The wait is logged now, with the session that holds the lock and how to end it.
describe.runIf(await postgresAvailable())("a start waiting for the start-up lock of the database", () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it("says every 5 s that it waits and which session holds the lock, and goes on once it is free", { timeout: 30_000 }, async () => {
    // Another deployment on the same PostgreSQL server holds the same lock in its own database, which is not ours
    // to wait for nor to name (it was named: CI, 2026-11-28).
    const elsewhere = await createDatabase();
    const neighbour = new pg.Client({ connectionString: elsewhere.url });
    await neighbour.connect();
    await neighbour.query("SELECT pg_advisory_lock($1)", [STARTUP_LOCK]);
    onTestFinished(async () => {
      await neighbour.end();
      await elsewhere.drop();
    });
    const holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    const pid = Number((await holder.query("SELECT pg_backend_pid() AS pid")).rows[0].pid);
    await holder.query("SELECT pg_advisory_lock($1)", [STARTUP_LOCK]);
    const log = logLines();
    let opened = false;
    const opening = openPostgresStorage({ url: database.url, poolSize: 2, queryTimeoutMs: 10_000 }, log.logger).then((storage) => {
      opened = true;
      return storage;
    });
    // Awaited below; a failure before that is the test's, not an unhandled rejection.
    opening.catch(() => {});
    try {
      const waiting = (): string | undefined =>
        log.lines().find((l) => String(l.msg).startsWith("waiting for the start-up lock of the database"))?.msg as string | undefined;
      await expect.poll(waiting, { timeout: 10_000, interval: 250 }).toMatch(
        new RegExp(`^waiting for the start-up lock of the database, held by session ${pid} \\(127\\.0\\.0\\.1/32, idle since .+\\): if the server or command holding it is gone, end that session with SELECT pg_terminate_backend\\(${pid}\\)$`),
      );
      expect(opened).toBe(false);
    } finally {
      await holder.end();
    }
    const storage = await opening;
    await storage.close();
  });
});

// A probe (2026-11-28): a cloudplane-admin command waiting for the start-up lock when the database went silent (a
// dropped route) waited for ever: the lock was asked for in one statement with no bound. It is asked for again and
// again now, each ask and each read of the holder bounded, and the command fails with the store's error.
describe.runIf(await postgresAvailable())("a cloudplane-admin command waiting for the start-up lock of a database that goes silent", () => {
  const dir = tempDir();
  let database: TestDatabase;
  let proxy: TcpProxy;
  beforeAll(async () => {
    database = await createDatabase();
    // The schema and the admin account, made by opening the store once as a server does.
    const storage = await openPostgresStorage({ url: database.url, poolSize: 2, queryTimeoutMs: 10_000 }, logLines().logger);
    await storage.close();
    proxy = await startTcpProxy(database.url, 5432);
  });
  afterAll(async () => {
    await proxy?.close();
    await database?.drop();
    dir.remove();
  });

  it("fails with the store's error within the bound of one ask, and leaves the lock to its holder", { timeout: 60_000 }, async () => {
    const holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    await holder.query("SELECT pg_advisory_lock($1)", [STARTUP_LOCK]);
    try {
      const command = runAdminCli(dir.path, ["accounts", "list"], { DATABASE_URL: proxy.url });
      // Waiting: asking for the lock, through the proxy.
      const asking = async (): Promise<number> =>
        Number(
          (
            await holder.query(
              "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%advisory_lock(%'",
            )
          ).rows[0].n,
        );
      await expect.poll(asking, { timeout: 20_000, interval: 100 }).toBeGreaterThan(0);
      // Past its first notice of the wait (at 5 s), whose read of the holder went through the pool until the same
      // probe: a read there gone silent held up the command's failure for the pool's ten minutes.
      await new Promise((resolve) => setTimeout(resolve, 7000));
      proxy.silence();
      const silenced = performance.now();
      const result = await command;
      // An ask is bounded by 10 s, and given up as silent 2 s after that.
      expect(performance.now() - silenced).toBeLessThan(20_000);
      expect(result.exitCode).not.toBe(0);
      expect(result.stderr).toContain("could not open the PostgreSQL database of DATABASE_URL");
      expect(result.stdout).toBe("");
      // The holder still holds it.
      const held = await holder.query("SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid()");
      expect(Number(held.rows[0].n)).toBe(1);
    } finally {
      await holder.end();
    }
  });
});

// A probe (2026-11-28): the connection migrations run on was said to have no timeout, but took the database's own
// default (ALTER DATABASE ... SET statement_timeout), and a migration of a large table failed every start with only
// "canceling statement due to statement timeout".
describe.runIf(await postgresAvailable())("migrations on a database with a statement timeout of its own", () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createDatabase();
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    // Shorter than creating the first migration's tables and indexes takes.
    await admin.query(`ALTER DATABASE "${admin.database}" SET statement_timeout = '1ms'`);
    await admin.end();
  });
  afterAll(async () => {
    await database?.drop();
  });

  // CI (2026-11-28): the migration connection's first statement, a `SET statement_timeout = 0`, itself ran under
  // the database's 1 ms and was cancelled when the machine was busy. Its bound now comes with the connection.
  it("are run on a connection whose very first statement is not bound by it", async () => {
    const client = createUnboundedClient(database.url);
    await client.connect();
    try {
      const slept = await client.query("SELECT true AS slept FROM pg_sleep(0.05)");
      expect(slept.rows[0].slept).toBe(true);
    } finally {
      await client.end();
    }
  });

  it("run without it, and the store opens", async () => {
    const storage = await openPostgresStorage({ url: database.url, poolSize: 2, queryTimeoutMs: 10_000 }, logLines().logger);
    try {
      expect(await storage.kms.readMasterKeyCheck()).toBeNull();
    } finally {
      await storage.close();
    }
  });
});
