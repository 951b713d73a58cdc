import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase, postgresAvailable } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";
import { spawnServer } from "../support/server.js";
import type { SpawnedServer } from "../support/server.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import type { TcpProxy } from "../support/tcp-proxy.js";
import { tempDir } from "../support/temp-dir.js";

// PostgreSQL going away under a server (docs/storage.md, "Outages"). A probe (2026-11-28): a connection that broke
// while a transaction was using it made its client emit "error" with no listener, and the process ended, so a
// database restart took every busy server down.

describe.runIf(await postgresAvailable())("a server on PostgreSQL whose connections are terminated", () => {
  const dir = tempDir();
  let database: TestDatabase;
  let server: SpawnedServer;

  beforeAll(async () => {
    database = await createDatabase();
    server = await spawnServer({ dataDir: dir.path, env: { DATABASE_URL: database.url, MASTER_KEY: Buffer.alloc(32, 5).toString("base64") } });
  });
  afterAll(async () => {
    await server?.kill("SIGKILL");
    await database?.drop();
    dir.remove();
  });

  const create = (): Promise<number> =>
    fetch(`${server.url}/v1/keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
      body: JSON.stringify({ parentId: "outage" }),
    }).then(
      async (res) => {
        await res.arrayBuffer();
        return res.status;
      },
      () => 0,
    );

  it("survives it in the middle of its transactions, and serves again once it reconnects", async () => {
    let stop = false;
    const load = Array.from({ length: 16 }, async () => {
      const statuses: number[] = [];
      while (!stop) statuses.push(await create());
      return statuses;
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      for (let i = 0; i < 3; i++) {
        await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()");
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    } finally {
      await admin.end();
    }
    stop = true;
    const statuses = (await Promise.all(load)).flat();
    expect(server.running(), server.logs()).toBe(true);
    // Calls caught by the termination failed; none was answered by a process that was gone (status 0).
    expect(statuses.filter((s) => s === 0)).toEqual([]);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0);
    await expect.poll(create, { timeout: 10_000 }).toBe(200);
  });
});

// A probe (2026-11-28): with the database unreachable, /readyz stayed 200 while no call could succeed, so a balancer
// kept sending calls to the server. It answers 503 "store unreachable" once the change feed has not heard the
// database for 5 s, and 200 again once it does.
describe.runIf(await postgresAvailable())("readiness of a server whose database is unreachable", () => {
  const dir = tempDir();
  let database: TestDatabase;
  let proxy: TcpProxy;
  let server: SpawnedServer;

  beforeAll(async () => {
    database = await createDatabase();
    proxy = await startTcpProxy(database.url, 5432);
    server = await spawnServer({ dataDir: dir.path, env: { DATABASE_URL: proxy.url, MASTER_KEY: Buffer.alloc(32, 6).toString("base64") } });
  });
  afterAll(async () => {
    await server?.kill("SIGKILL");
    await proxy?.close();
    await database?.drop();
    dir.remove();
  });

  const ready = async (): Promise<string> => {
    const res = await fetch(`${server.url}/readyz`);
    return `${res.status} ${((await res.json()) as { status: string }).status}`;
  };

  it("says not ready while the database is unheard for 5 s, and ready again once it is back", { timeout: 60_000 }, async () => {
    expect(await ready()).toBe("200 ok");
    proxy.blackhole();
    const lost = performance.now();
    await expect.poll(ready, { timeout: 20_000, interval: 250 }).toBe("503 store unreachable");
    expect(performance.now() - lost).toBeGreaterThanOrEqual(5000);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    proxy.restore();
    await expect.poll(ready, { timeout: 20_000, interval: 250 }).toBe("200 ok");
  });
});
