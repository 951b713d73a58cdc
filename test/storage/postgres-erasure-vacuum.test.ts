import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgresStorage } from "../../src/storage/postgres/postgres-storage.js";
import type { Storage } from "../../src/storage/storage.js";
import { logLines } from "../support/log-lines.js";
import { createDatabase, postgresAvailable } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";

// A probe (2026-11-28): the VACUUM that removes erased material's dead row versions waited silently for a
// conflicting lock (an anti-wraparound autovacuum, pg_repack) for up to its ten minutes, and the sweep with it. It
// waits a few seconds now, and the sweep tries again at its next interval.
describe.runIf(await postgresAvailable())("the VACUUM after an erasure, behind a conflicting lock", () => {
  let database: TestDatabase;
  let storage: Storage;
  beforeAll(async () => {
    database = await createDatabase();
    storage = await openPostgresStorage({ url: database.url, poolSize: 2, queryTimeoutMs: 10_000 }, logLines().logger);
  });
  afterAll(async () => {
    await storage?.close();
    await database?.drop();
  });

  it("gives up within seconds, to be tried again, and succeeds once the lock is gone", { timeout: 30_000 }, async () => {
    const holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    try {
      await holder.query("BEGIN");
      // What VACUUM itself and autovacuum take.
      await holder.query("LOCK TABLE kms_versions IN SHARE UPDATE EXCLUSIVE MODE");
      const started = performance.now();
      expect(await storage.kms.scrubErased()).toBe(false);
      expect(performance.now() - started).toBeLessThan(8000);
      await holder.query("ROLLBACK");
    } finally {
      await holder.end();
    }
    expect(await storage.kms.scrubErased()).toBe(true);
  });
});
