import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgresStorage } from "../../src/storage/postgres/postgres-storage.js";
import { logLines } from "../support/log-lines.js";
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
