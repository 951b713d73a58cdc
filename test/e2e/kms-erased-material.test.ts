import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeClock } from "../support/fake-clock.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { storeRows } from "../support/store-rows.js";

// "At destroyAt the version becomes DESTROYED and its key material is erased from storage" (CONTRACT section 5).
// The sweeper wrote NULL over the row, and the wrapped material stayed in the page's free space and in the
// write-ahead log, where the master.key of the same data directory unwrapped it: every destroyed version of a
// probe's server was recovered, and its ciphertexts opened (2026-11-28). On the embedded store no byte of it may be
// left in any file of the data directory once the sweep has erased it.

const GRACE_SECONDS = 60;
let server: TestServer;
const clock = new FakeClock();

beforeAll(async () => {
  server = await startServer({ clock, env: { DESTROY_GRACE_SECONDS: String(GRACE_SECONDS), SWEEP_INTERVAL_SECONDS: "1" } });
});
afterAll(() => server.stop());

async function rest(method: string, path: string, body?: object): Promise<Record<string, unknown>> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  expect(res.status, `${method} ${path}`).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

// Every file of the data directory that holds one of `needles`, by name.
function filesHolding(needles: Buffer[]): string[] {
  return readdirSync(server.dataDir).filter((name) => {
    const bytes = readFileSync(join(server.dataDir, name));
    return needles.some((needle) => bytes.includes(needle));
  });
}

describe("destroyed key material", () => {
  it("is in no file of the data directory once the sweep has erased it", async () => {
    const keys: string[] = [];
    for (let i = 0; i < 10; i++) {
      const key = await rest("POST", "/v1/keys", { parentId: "erased" });
      const id = key.id as string;
      keys.push(id);
      await rest("POST", `/v1/keys/${id}/versions`, {});
      // Moved around the page by a few writes of other sizes, as a live key's row is.
      await rest("POST", `/v1/keys/${id}/versions/2/disable`, {});
      await rest("POST", `/v1/keys/${id}/versions/2/enable`, {});
      await rest("POST", "/v1/encrypt", { keyId: id, keyVersionId: 2, plaintext: Buffer.from(`secret ${i}`).toString("base64") });
    }
    const rows = await storeRows<{ key_id: string; wrapped_material: Buffer }>(server, "SELECT key_id, wrapped_material FROM kms_versions WHERE id = 2");
    const material = rows.map((r) => Buffer.from(r.wrapped_material));
    expect(material).toHaveLength(10);
    if (server.databaseUrl === null) expect(filesHolding(material).length).toBeGreaterThan(0);

    for (const id of keys) await rest("DELETE", `/v1/keys/${id}/versions/2`);
    clock.advance((GRACE_SECONDS + 1) * 1000);
    // The next sweeps erase the rows, then the copies.
    for (let i = 0; i < 100; i++) {
      const left = await storeRows<{ n: number }>(server, "SELECT COUNT(*) AS n FROM kms_versions WHERE id = 2 AND wrapped_material IS NOT NULL");
      if (Number(left[0]!.n) === 0 && (server.databaseUrl !== null || filesHolding(material).length === 0)) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const versions = await Promise.all(keys.map((id) => rest("GET", `/v1/keys/${id}/versions/2`)));
    expect(versions.map((v) => v.state)).toEqual(keys.map(() => "DESTROYED"));
    // PostgreSQL keeps what it keeps beyond its tables (docs/storage.md, "Erased material"); the embedded store
    // keeps nothing.
    if (server.databaseUrl === null) expect(filesHolding(material)).toEqual([]);
    // Version 1 of every key still works.
    for (const id of keys) await rest("POST", "/v1/encrypt", { keyId: id, keyVersionId: 1, plaintext: Buffer.from("still").toString("base64") });
  }, 30_000);
});
