import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { createKmsClient, restCall } from "../support/kms-clients.js";
import { startServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";

// A key whose stored nextRotationTime lies past the Timestamp's range, as servers before 2026-11-27 could store it
// (test/e2e/kms-time-bounds.test.ts): the key and every list of its namespace failed as JSON, restarts included.
// Migration 10 brings such a time back to the range's last millisecond when the server starts.

const dir = tempDir();
afterAll(() => dir.remove());

describe("a stored nextRotationTime past the year 9999", () => {
  it("is repaired at start: the key and its namespace read again", async () => {
    const first = await startServer({ dataDir: dir.path, env: { DATABASE_URL: "" } });
    const kms = createKmsClient("rest", first.url);
    const id = (await kms.createKey({ parentId: "repaired", rotationPeriodSeconds: 86400 })).id!;
    await kms.close();
    await first.stop();

    // What an older server stored, and the schema it left.
    const db = new Database(join(dir.path, "cloudplane.db"));
    db.prepare("UPDATE kms_keys SET next_rotation_at = ? WHERE id = ?").run(253402300800000, id);
    db.prepare("DELETE FROM schema_migrations WHERE version = 10").run();
    db.close();

    const second = await startServer({ dataDir: dir.path, env: { DATABASE_URL: "" } });
    try {
      expect(await restCall(second.url, "GET", `/v1/keys/${id}`)).toMatchObject({ id, nextRotationTime: "9999-12-31T23:59:59.999Z" });
      expect(await restCall(second.url, "GET", "/v1/keys?parentId=repaired")).toMatchObject({ keys: [{ id }] });
    } finally {
      await second.stop();
    }
  });
});
