import { readFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnServer } from "../support/server.js";
import type { SpawnedServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";

// A store that cannot take a write for now (here: the database locked past the server's 5 s wait, as a full disk or
// a lost PostgreSQL would refuse it) is UNAVAILABLE with a RetryInfo and Retry-After, a cause a retry may outlast;
// it was INTERNAL, "quote the request id" (two probes, 2026-11-28), and is logged at warn.
describe("a write the store refuses for now", () => {
  const dir = tempDir();
  let server: SpawnedServer;

  beforeAll(async () => {
    server = await spawnServer({ dataDir: dir.path });
  });
  afterAll(async () => {
    await server?.kill("SIGTERM");
    dir.remove();
  });

  const serviceAuth = () =>
    fetch(`${server.url}/public/v2/service_auth`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: readFileSync(join(dir.path, "admin-credentials.json")),
    });

  it("is answered 503 STORE_UNAVAILABLE with Retry-After, then served once the store takes writes again", { timeout: 30_000 }, async () => {
    const holder = new Database(join(dir.path, "cloudplane.db"));
    holder.exec("BEGIN IMMEDIATE");
    let refused: Response;
    try {
      refused = await serviceAuth();
    } finally {
      holder.exec("ROLLBACK");
      holder.close();
    }
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("1");
    const body = (await refused.json()) as { code: number; message: string; details: { typeUrl: string }[] };
    expect({ code: body.code, message: body.message }).toEqual({
      code: 14,
      message: "the server's store cannot be written or reached for now (a full disk, a lost database connection); retry later, and read before retrying a change: a connection lost while it committed may have taken the change",
    });
    expect(body.details.map((d) => d.typeUrl)).toContain("type.googleapis.com/google.rpc.RetryInfo");
    expect(server.logs()).toContain("the store failed; the call was answered UNAVAILABLE");
    expect(server.logs()).not.toContain('"level":50');
    expect((await serviceAuth()).status).toBe(200);
  });
});
