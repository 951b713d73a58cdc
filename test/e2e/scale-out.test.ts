import { randomUUID } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase, postgresAvailable } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";
import { spawnServer } from "../support/server.js";
import type { SpawnedServer } from "../support/server.js";
import { adminAuth, fetchToken } from "../support/credentials.js";
import { runAdminCli } from "../support/principals.js";
import { storeRows } from "../support/store-rows.js";
import { tempDir } from "../support/temp-dir.js";
import { FLAVOR, ROOMY_CLUSTER, VDC, rest, restNodePoolId, writeTestCatalog } from "./compute-helpers.js";

// Three server processes (real `node` processes, as an operator starts them) on one PostgreSQL database, called
// over HTTP: they share keys, versions, node pools and tasks (CONTRACT section 8, issue 12).

const pgUp = await postgresAvailable();

// Per task: two nodes of 150 ms each, so that a server killed in the middle of the run is holding tasks.
const NODE_DELAY_MS = 150;
const TASK_CONCURRENCY = 4;

describe.skipIf(!pgUp)("three servers on one PostgreSQL database", () => {
  const dir = tempDir();
  let db: TestDatabase;
  let a: SpawnedServer;
  let b: SpawnedServer;
  let c: SpawnedServer;
  const all = (): SpawnedServer[] => [a, b, c];
  const dataDir = `${dir.path}/data`;
  let env: Record<string, string>;

  beforeAll(async () => {
    db = await createDatabase();
    env = {
      DATABASE_URL: db.url,
      CATALOG_FILE: writeTestCatalog(dir.path),
      PROVIDER_DELAY_MS: String(NODE_DELAY_MS),
      TASK_CONCURRENCY: String(TASK_CONCURRENCY),
      // Well within max_connections (100 by default) while other test files use the same PostgreSQL.
      DATABASE_POOL_SIZE: "5",
      LOG_LEVEL: "info",
    };
    // One data directory for the three: the admin's credentials file the server that bootstraps writes is read by
    // the helpers for every server. The state itself is in the database. Started at once on an empty database: one
    // migrates and creates the admin account under the start-up lock, the others find them.
    [a, b, c] = await Promise.all([spawnServer({ dataDir, env }), spawnServer({ dataDir, env }), spawnServer({ dataDir, env })]);
  }, 60_000);

  afterAll(async () => {
    for (const s of [a, b, c]) if (s?.running()) await s.kill("SIGTERM");
    await db?.drop();
    dir.remove();
  });

  async function call(server: SpawnedServer, method: string, path: string, body?: unknown): Promise<{ status: number; json: JsonObject }> {
    return rest(server.url, method, path, body as JsonObject | undefined);
  }

  async function encrypt(server: SpawnedServer, keyId: string, version: number): Promise<{ status: number; json: JsonObject }> {
    return call(server, "POST", "/v1/encrypt", { keyId, keyVersionId: version, plaintext: Buffer.from("across servers").toString("base64") });
  }

  it("started at once, made one admin account", async () => {
    const accounts = await storeRows<{ name: string }>({ dataDir: "", databaseUrl: db.url }, "SELECT name FROM identity_service_accounts");
    expect(accounts).toEqual([{ name: "admin" }]);
    expect(all().map((s) => s.logs()).filter((l) => l.includes("created the admin service account")).length).toBe(1);
  });

  it("refuses to start a server with another master key than the database was written with", async () => {
    await expect(spawnServer({ dataDir: `${dir.path}/other`, env: { ...env, MASTER_KEY: Buffer.alloc(32, 9).toString("base64") } })).rejects.toThrow(
      /cloudplane failed to start: the master key from MASTER_KEY \(key id [0-9a-f]{16}\) does not match the one the database of DATABASE_URL was written with .*; nothing was changed\. Start every server with the master key the database was written with/,
    );
  });

  it("takes an account made with the operator command on the shared database on every server, and its revocation", async () => {
    const made = await runAdminCli(dataDir, ["--json", "accounts", "create", "shared-app", "--grant", "editor@kms-namespace:ops"], { DATABASE_URL: db.url });
    expect(made.exitCode).toBe(0);
    const { client_id, client_secret } = JSON.parse(made.stdout) as { client_id: string; client_secret: string };
    const token = await fetchToken(c.url, client_id, client_secret);
    const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    const created = await fetch(`${b.url}/v1/keys`, { method: "POST", headers, body: JSON.stringify({ parentId: "ops" }) });
    expect(created.status).toBe(200);
    expect((await fetch(`${a.url}/v1/keys`, { method: "POST", headers, body: JSON.stringify({ parentId: "elsewhere" }) })).status).toBe(403);
    expect((await runAdminCli(dataDir, ["accounts", "revoke", "shared-app"], { DATABASE_URL: db.url })).exitCode).toBe(0);
    // Every server refuses it within a second (announced at once; the access generation is also polled every second).
    for (const s of all()) {
      await expect
        .poll(async () => (await fetch(`${s.url}/v1/keys?parentId=ops`, { headers })).status, { timeout: 1000, interval: 20 })
        .toBe(401);
    }
  });

  it("uses on the other servers a key created on one", async () => {
    const created = await call(a, "POST", "/v1/keys", { parentId: "shared", name: "made-on-a" });
    expect(created.status).toBe(200);
    const keyId = String(created.json.id);
    const sealed = await encrypt(b, keyId, 1);
    expect(sealed.status).toBe(200);
    const opened = await call(c, "POST", "/v1/decrypt", { keyId, ciphertext: sealed.json.ciphertext });
    expect(opened).toEqual({ status: 200, json: { keyId, keyVersionId: 1, plaintext: Buffer.from("across servers").toString("base64") } });
    expect((await call(c, "GET", `/v1/keys/${keyId}`)).json).toMatchObject({ id: keyId, name: "made-on-a" });
    const listed = await call(b, "GET", "/v1/keys?parentId=shared");
    expect((listed.json.keys as JsonObject[]).map((k) => k.id)).toEqual([keyId]);
    // Its name is taken on every server.
    expect((await call(c, "POST", "/v1/keys", { parentId: "shared", name: "made-on-a" })).status).toBe(409);
  });

  // One transaction at a time holds the key's row, each unwrapping every version for the cache entry it builds:
  // several seconds on a busy two-core machine.
  it("numbers 200 versions created at once through the three servers 2..201, each exactly once", { timeout: 120_000 }, async () => {
    const keyId = String((await call(a, "POST", "/v1/keys", { parentId: "versions" })).json.id);
    const made = await Promise.all(Array.from({ length: 200 }, (_, i) => call(all()[i % 3]!, "POST", `/v1/keys/${keyId}/versions`, {})));
    expect(made.every((m) => m.status === 200)).toBe(true);
    const ids = made.map((m) => Number(m.json.id)).sort((x, y) => x - y);
    expect(ids).toEqual(Array.from({ length: 200 }, (_, i) => i + 2));
    const stored = await storeRows<{ id: number }>({ dataDir: "", databaseUrl: db.url }, "SELECT id FROM kms_versions WHERE key_id = ? ORDER BY id", [keyId]);
    expect(stored.map((r) => r.id)).toEqual(Array.from({ length: 201 }, (_, i) => i + 1));
    // Every server sees all of them (no cache holds an older state of the key).
    for (const s of all()) {
      const page = await call(s, "GET", `/v1/keys/${keyId}/versions?page.limit=1000`);
      expect((page.json.versions as JsonObject[]).length).toBe(201);
    }
  });

  it("a version disabled on one server stops encrypting on another within one second", async () => {
    const keyId = String((await call(a, "POST", "/v1/keys", { parentId: "disable" })).json.id);
    await call(a, "POST", `/v1/keys/${keyId}/versions`, {});
    // C has the key in its cache, with the material of both versions unwrapped.
    expect((await encrypt(c, keyId, 2)).status).toBe(200);
    expect((await encrypt(c, keyId, 2)).status).toBe(200);
    const disabled = await call(a, "POST", `/v1/keys/${keyId}/versions/2/disable`, {});
    expect(disabled.json.state).toBe("DISABLED");
    const since = Date.now();
    let answer = await encrypt(c, keyId, 2);
    while (answer.status === 200 && Date.now() - since < 5000) answer = await encrypt(c, keyId, 2);
    const took = Date.now() - since;
    expect(answer.status).toBe(400);
    expect(answer.json.message).toBe(`key version 2 of key ${keyId} is not enabled, current state is: DISABLED`);
    expect(took).toBeLessThan(1000);
    // And B, which never cached the key, refuses at once.
    expect((await encrypt(b, keyId, 2)).status).toBe(400);
  });

  it("runs 100 node pool tasks, each to one outcome, while one server is killed with SIGKILL midway; all finish", { timeout: 120_000 }, async () => {
    const created = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        call(all()[i % 3]!, "POST", `/cluster/v1/${VDC}/node-pools`, {
          clusterId: ROOMY_CLUSTER,
          nodeConfig: { computeFlavor: FLAVOR },
          nodePoolName: `scale-${i}`,
          scalePolicy: { fixedScale: { count: 2 } },
        }),
      ),
    );
    expect(created.map((r) => r.status)).toEqual(Array(100).fill(200));
    const tasks = created.map((r) => r.json.task as JsonObject);
    const poolIds = tasks.map(restNodePoolId);

    // Midway: some tasks done, B holding others.
    const countDone = async (): Promise<number> =>
      (await storeRows<{ n: number }>({ dataDir: "", databaseUrl: db.url }, "SELECT count(*)::int AS n FROM compute_tasks WHERE status = 'SUCCEEDED'"))[0]!.n;
    await expect.poll(countDone, { timeout: 30_000, interval: 20 }).toBeGreaterThanOrEqual(20);
    await b.kill("SIGKILL");
    expect(await countDone()).toBeLessThan(100);

    // Everything finishes on A and C, B's tasks once its lease (5 s without a heartbeat) has run out.
    for (const t of tasks) {
      const waited = await call(t === tasks[0] ? a : c, "POST", `/cluster/v1/${VDC}/tasks/${String(t.id)}:wait`, { timeout: "60s" });
      expect(waited.json.task).toMatchObject({ id: t.id, status: "SUCCEEDED", done: true });
    }
    const rows = await storeRows<{ id: string; status: string; attempts: number }>(
      { dataDir: "", databaseUrl: db.url },
      "SELECT id, status, attempts FROM compute_tasks ORDER BY id",
    );
    expect(rows.length).toBe(100);
    expect(rows.every((r) => r.status === "SUCCEEDED")).toBe(true);
    // Run once each: a second run only for the tasks the killed server held (resumed), never more.
    const resumed = rows.filter((r) => r.attempts > 1);
    expect(rows.every((r) => r.attempts <= 2)).toBe(true);
    expect(resumed.length).toBeGreaterThan(0);
    expect(resumed.length).toBeLessThanOrEqual(TASK_CONCURRENCY);
    expect(a.logs() + c.logs()).toContain("resuming unfinished task");
    // The simulated provider placed exactly two nodes per pool: nothing was provisioned twice.
    const nodes = await storeRows<{ node_pool_id: string; reserved: number; ready: number }>(
      { dataDir: "", databaseUrl: db.url },
      "SELECT node_pool_id, reserved, ready FROM compute_simulated_nodes",
    );
    expect(nodes.map((n) => n.node_pool_id).sort()).toEqual([...poolIds].sort());
    expect(nodes.every((n) => n.reserved === 2 && n.ready === 2)).toBe(true);
    for (const [i, id] of poolIds.slice(0, 5).entries()) {
      expect((await call(c, "GET", `/cluster/v1/${VDC}/node-pools/${id}`)).json.nodePool).toMatchObject({ name: `scale-${i}`, state: "RUNNING" });
    }
  });
});

// The rate limits of three servers on one database, counted in one Redis (REDIS_URL): a credential has one budget
// whichever servers its calls reach (CONTRACT sections 6 and 8).
describe.skipIf(!pgUp)("three servers on one PostgreSQL database and one Redis", () => {
  const dir = tempDir();
  const prefix = `cloudplane-scale-test:${randomUUID()}`;
  const redisUrl = process.env.CLOUDPLANE_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
  let db: TestDatabase;
  let servers: SpawnedServer[] = [];

  beforeAll(async () => {
    db = await createDatabase();
    const env = {
      DATABASE_URL: db.url,
      DATABASE_POOL_SIZE: "3",
      CATALOG_FILE: writeTestCatalog(dir.path),
      REDIS_URL: redisUrl,
      RATE_LIMIT_KEY_PREFIX: prefix,
      RATE_LIMIT_GET_PER_MINUTE: "20",
      RATE_LIMIT_POST_PER_MINUTE: "5",
    };
    const dataDir = `${dir.path}/data`;
    servers = await Promise.all([spawnServer({ dataDir, env }), spawnServer({ dataDir, env }), spawnServer({ dataDir, env })]);
  }, 60_000);

  afterAll(async () => {
    for (const s of servers) if (s.running()) await s.kill("SIGTERM");
    await db?.drop();
    const redis = new Redis(redisUrl);
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    dir.remove();
  });

  it("draws every server's GETs and POSTs of one credential from one budget", async () => {
    const list = `/cluster/v1/${VDC}/node-pools?clusterId=${ROOMY_CLUSTER}`;
    const remaining: string[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${servers[i % 3]!.url}${list}`, { headers: adminAuth(servers[i % 3]!.url) });
      expect(res.status).toBe(200);
      remaining.push(res.headers.get("x-ratelimit-remaining") ?? "");
      await res.arrayBuffer();
    }
    expect(remaining).toEqual(Array.from({ length: 20 }, (_, i) => String(19 - i)));
    for (const server of servers) {
      const refused = await rest(server.url, "GET", list);
      expect(refused.status).toBe(429);
      expect(refused.json.message).toMatch(/GET/);
    }
    for (let i = 0; i < 5; i++) {
      const made = await rest(servers[i % 3]!.url, "POST", `/cluster/v1/${VDC}/node-pools`, {
        clusterId: ROOMY_CLUSTER,
        nodePoolName: `limited-${i}`,
        nodeConfig: { computeFlavor: FLAVOR },
        scalePolicy: { fixedScale: { count: 0 } },
      });
      expect(made.status).toBe(200);
    }
    const refused = await rest(servers[2]!.url, "POST", `/cluster/v1/${VDC}/node-pools`, {
      clusterId: ROOMY_CLUSTER,
      nodePoolName: "limited-5",
      nodeConfig: { computeFlavor: FLAVOR },
      scalePolicy: { fixedScale: { count: 0 } },
    });
    expect(refused.status).toBe(429);
    // Nothing was made for the refused call.
    const pools = await storeRows<{ name: string }>({ dataDir: "", databaseUrl: db.url }, "SELECT name FROM compute_node_pools ORDER BY name");
    expect(pools.map((p) => p.name)).toEqual(["limited-0", "limited-1", "limited-2", "limited-3", "limited-4"]);
  });
});
