import { fromBinary } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { createDatabase, postgresAvailable } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";
import { spawnServer } from "../support/server.js";
import type { SpawnedServer } from "../support/server.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import type { TcpProxy } from "../support/tcp-proxy.js";
import { tempDir } from "../support/temp-dir.js";
import { CLUSTER, FLAVOR, VDC, rest, writeTestCatalog } from "./compute-helpers.js";

// PostgreSQL going away under a server (docs/storage.md, "Outages"). A probe (2026-11-28): a connection that broke
// while a transaction was using it made its client emit "error" with no listener, and the process ended, so a
// database restart took every busy server down.

// 16 callers, each calling again as soon as it is answered, until stopped; `stop` gives every answer.
function steadyLoad<T>(call: () => Promise<T>): { stop: () => Promise<T[]> } {
  let stopped = false;
  const callers = Array.from({ length: 16 }, async () => {
    const answers: T[] = [];
    while (!stopped) answers.push(await call());
    return answers;
  });
  return {
    async stop() {
      stopped = true;
      return (await Promise.all(callers)).flat();
    },
  };
}

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
    const load = steadyLoad(create);
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
    const statuses = await load.stop();
    expect(server.running(), server.logs()).toBe(true);
    // Calls caught by the termination failed; none was answered by a process that was gone (status 0), and none
    // INTERNAL (500): node-postgres's own errors about the lost connection ("Connection terminated unexpectedly",
    // "not queryable") are the store's outage, UNAVAILABLE, as PostgreSQL's own are.
    expect(statuses.filter((s) => s === 0 || s === 500)).toEqual([]);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0);
    await expect.poll(create, { timeout: 10_000 }).toBe(200);
  });
});

// A server on a database of its own, reached through a proxy (tcp-proxy.ts) that the tests make fail, for the tests of
// one describe block. The three are read once beforeAll has made them.
function serverBehindProxy(env: Record<string, string>): { server: SpawnedServer; proxy: TcpProxy; database: TestDatabase } {
  const dir = tempDir();
  const made = {} as { server: SpawnedServer; proxy: TcpProxy; database: TestDatabase };
  beforeAll(async () => {
    made.database = await createDatabase();
    made.proxy = await startTcpProxy(made.database.url, 5432);
    made.server = await spawnServer({ dataDir: dir.path, env: { DATABASE_URL: made.proxy.url, ...env } });
  });
  afterAll(async () => {
    await made.server?.kill("SIGKILL");
    await made.proxy?.close();
    await made.database?.drop();
    dir.remove();
  });
  return made;
}

// A probe (2026-11-28): with the database unreachable, /readyz stayed 200 while no call could succeed, so a balancer
// kept sending calls to the server. It answers 503 "store unreachable" once the change feed has not heard the
// database for 5 s, and 200 again once it does.
describe.runIf(await postgresAvailable())("readiness of a server whose database is unreachable", () => {
  const world = serverBehindProxy({ MASTER_KEY: Buffer.alloc(32, 6).toString("base64") });

  const ready = async (): Promise<string> => {
    const res = await fetch(`${world.server.url}/readyz`);
    return `${res.status} ${((await res.json()) as { status: string }).status}`;
  };

  it("says not ready while the database is unheard for 5 s, and ready again once it is back", { timeout: 60_000 }, async () => {
    expect(await ready()).toBe("200 ok");
    world.proxy.blackhole();
    const lost = performance.now();
    await expect.poll(ready, { timeout: 20_000, interval: 250 }).toBe("503 store unreachable");
    expect(performance.now() - lost).toBeGreaterThanOrEqual(5000);
    expect((await fetch(`${world.server.url}/healthz`)).status).toBe(200);
    world.proxy.restore();
    await expect.poll(ready, { timeout: 20_000, interval: 250 }).toBe("200 ok");
  });
});

// A probe (2026-11-28): connections that went silent in the middle of a statement (a dropped route) were never given
// up. Every call waiting on one waited for ever, the pool ran out, the server served nothing until the silence ended,
// and SIGTERM never ended it. A statement now waits DATABASE_QUERY_TIMEOUT_SECONDS at most; its connection is then
// given up and its call answered UNAVAILABLE.
describe.runIf(await postgresAvailable())("a server whose connections to PostgreSQL go silent in the middle of statements", () => {
  const world = serverBehindProxy({
    MASTER_KEY: Buffer.alloc(32, 7).toString("base64"),
    DATABASE_QUERY_TIMEOUT_SECONDS: "2",
    SHUTDOWN_TIMEOUT_SECONDS: "5",
  });

  interface Answer {
    status: number;
    reason: string;
    ms: number;
  }
  const create = async (): Promise<Answer> => {
    const started = performance.now();
    const res = await fetch(`${world.server.url}/v1/keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${world.server.token}`, "content-type": "application/json" },
      body: JSON.stringify({ parentId: "silent" }),
    });
    const body = (await res.json()) as { details?: { typeUrl: string; value: string }[] };
    const info = body.details?.find((d) => d.typeUrl === "type.googleapis.com/google.rpc.ErrorInfo");
    const reason = info === undefined ? "" : fromBinary(ErrorInfoSchema, base64Decode(info.value)).reason;
    return { status: res.status, reason, ms: performance.now() - started };
  };

  it("answers the calls caught UNAVAILABLE within the timeout, serves again on new connections, and stops on SIGTERM", { timeout: 60_000 }, async () => {
    expect((await create()).status).toBe(200);
    const load = steadyLoad(create);
    await new Promise((resolve) => setTimeout(resolve, 500));
    world.proxy.silence();
    const silenced = performance.now();
    // Connections opened from now on go through: once the silent ones are given up, calls succeed again.
    await expect.poll(async () => (await create()).status, { timeout: 20_000, interval: 100 }).toBe(200);
    const recovered = performance.now() - silenced;
    const answers = await load.stop();
    expect(world.server.running(), world.server.logs()).toBe(true);
    const failed = answers.filter((a) => a.status !== 200);
    // Some calls were in the middle of a statement when the connections went silent.
    expect(failed.length).toBeGreaterThan(0);
    // Each was answered 503 with the store's reason (the audit trail's, for a call whose record could not be written).
    expect(new Set(failed.map((a) => `${a.status} ${a.reason}`))).toSatisfy((seen: Set<string>) =>
      [...seen].every((s) => s === "503 STORE_UNAVAILABLE" || s === "503 AUDIT_UNAVAILABLE"),
    );
    // No call waited much longer than the timeout (2 s), and the silence did not last for the server.
    expect(Math.max(...answers.map((a) => a.ms))).toBeLessThan(8_000);
    expect(recovered).toBeLessThan(10_000);
    // The connections given up went silent mid-transaction: PostgreSQL has ended them too, and no lock is held.
    const admin = new pg.Client({ connectionString: world.database.url });
    await admin.connect();
    try {
      const stuck = async (): Promise<number> =>
        Number(
          (
            await admin.query(
              "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%' AND state_change < now() - interval '1 second'",
            )
          ).rows[0].n,
        );
      await expect.poll(stuck, { timeout: 10_000, interval: 250 }).toBe(0);
    } finally {
      await admin.end();
    }
    // The server still ends when told to, with no connection held by a statement that never ends.
    world.proxy.silence();
    void create().catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 200));
    const stopping = performance.now();
    const code = await world.server.kill("SIGTERM");
    // Its last writes (its task worker's retirement, the audit trail's last batch) may meet the silence too: it then
    // says its shutdown failed, with the cause, and exits 1.
    expect(code === 0 || (code === 1 && world.server.logs().includes('"msg":"shutdown failed"')), world.server.logs().slice(-3000)).toBe(true);
    expect(performance.now() - stopping).toBeLessThan(10_000);
  });
});

// A probe (2026-11-28), of the statement timeout above kept on the client's side only: a statement waiting for a lock
// that was given up left its backend waiting in PostgreSQL, and every timeout added a pool's worth of backends, until
// PostgreSQL refused every client ("too many clients already"). The timeout is PostgreSQL's own statement_timeout
// now: the statement is cancelled there, its call answered UNAVAILABLE, and the connection stays in the pool.
describe.runIf(await postgresAvailable())("a server on PostgreSQL whose statements wait for a lock held past their timeout", () => {
  const catalogDir = tempDir();
  const world = serverBehindProxy({
    MASTER_KEY: Buffer.alloc(32, 8).toString("base64"),
    DATABASE_QUERY_TIMEOUT_SECONDS: "2",
    // One connection, which the load keeps busy: what else needs the database must not wait behind it.
    DATABASE_POOL_SIZE: "1",
    CATALOG_FILE: writeTestCatalog(catalogDir.path),
    PROVIDER_DELAY_MS: "0",
  });
  afterAll(() => catalogDir.remove());

  // Holds `table` locked for `ms` from a connection of the test's, while `during` runs with another (a transaction
  // reads pg_stat_activity once, at its first look).
  async function whileLocked<T>(table: string, ms: number, during: (observer: pg.Client) => Promise<T>): Promise<T> {
    const holder = new pg.Client({ connectionString: world.database.url });
    const observer = new pg.Client({ connectionString: world.database.url });
    await Promise.all([holder.connect(), observer.connect()]);
    try {
      await holder.query(`BEGIN; LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
      const [result] = await Promise.all([during(observer), new Promise((resolve) => setTimeout(resolve, ms))]);
      await holder.query("COMMIT");
      return result;
    } finally {
      await Promise.all([holder.end(), observer.end()]);
    }
  }

  // A create (a transaction) or a list (a statement on its own) of keys, by turns.
  let turn = 0;
  const keyCall = async (): Promise<string> => {
    const list = turn++ % 2 === 1;
    const res = await fetch(`${world.server.url}/v1/keys${list ? "?parentId=locked" : ""}`, {
      method: list ? "GET" : "POST",
      headers: { authorization: `Bearer ${world.server.token}`, "content-type": "application/json" },
      body: list ? undefined : JSON.stringify({ parentId: "locked" }),
    });
    const body = (await res.json()) as { details?: { typeUrl: string; value: string }[] };
    const info = body.details?.find((d) => d.typeUrl === "type.googleapis.com/google.rpc.ErrorInfo");
    return `${res.status} ${info === undefined ? "" : fromBinary(ErrorInfoSchema, base64Decode(info.value)).reason}`.trim();
  };

  it("answers the calls caught 503 STORE_UNAVAILABLE, keeps to its pool's connections, and serves once the lock goes", { timeout: 60_000 }, async () => {
    expect(await keyCall()).toBe("200");
    const load = steadyLoad(keyCall);
    // The server's backends, and the longest any of them has waited for the lock, sampled while it is held for four
    // statement timeouts.
    const samples = await whileLocked("kms_keys", 8_000, async (observer) => {
      const seen: { backends: number; waitedMs: number; ready: number }[] = [];
      const until = performance.now() + 7_800;
      while (performance.now() < until) {
        const { rows } = await observer.query(
          `SELECT count(*) AS backends,
                  COALESCE(max(EXTRACT(EPOCH FROM clock_timestamp() - query_start) * 1000) FILTER (WHERE state = 'active'), 0) AS waited
             FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query NOT LIKE '%LOCK TABLE%'`,
        );
        const ready = (await fetch(`${world.server.url}/readyz`)).status;
        seen.push({ backends: Number(rows[0].backends), waitedMs: Number(rows[0].waited), ready });
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return seen;
    });
    await expect.poll(keyCall, { timeout: 10_000, interval: 100 }).toBe("200");
    const answers = await load.stop();
    // PostgreSQL cancelled each statement at its timeout (2 s): none waited for the lock much longer. They waited for
    // as long as it was held, given up by the server or not.
    expect(Math.max(...samples.map((x) => x.waitedMs))).toBeLessThan(2_800);
    // At most the pool's one and the change feed's own connection.
    expect(Math.max(...samples.map((x) => x.backends))).toBeLessThanOrEqual(2);
    // The database answered all along: the change feed, whose heartbeats waited behind the calls for the pool's
    // connection, said it was unheard, replaced its connection and made /readyz say "store unreachable" (a probe).
    expect(new Set(samples.map((x) => x.ready))).toEqual(new Set([200]));
    expect(world.server.logs()).not.toContain("lost the connection that receives other servers' changes");
    expect(new Set(answers.filter((a) => a !== "200"))).toEqual(new Set(["503 STORE_UNAVAILABLE"]));
    expect(world.server.logs()).not.toContain('"level":50');
  });

  it("runs a node pool task caught by the lock again once it goes, instead of failing it for good", { timeout: 60_000 }, async () => {
    const tasks = await whileLocked("compute_simulated_nodes", 3_000, async () => {
      const ids: string[] = [];
      for (const name of ["locked-a", "locked-b"]) {
        const created = await rest(world.server.url, "POST", `/cluster/v1/${VDC}/node-pools`, {
          serviceInstanceId: VDC,
          clusterId: CLUSTER,
          nodeConfig: { computeFlavor: FLAVOR },
          nodePoolName: name,
          scalePolicy: { fixedScale: { count: 1 } },
        });
        expect(created.status).toBe(200);
        ids.push(String((created.json.task as { id: string }).id));
      }
      return ids;
    });
    for (const id of tasks) {
      const done = await rest(world.server.url, "POST", `/cluster/v1/${VDC}/tasks/${id}:wait`, { timeout: "30s" });
      expect((done.json.task as { status: string }).status).toBe("SUCCEEDED");
    }
    expect(world.server.logs()).toContain("task run failed; this server runs it again");
  });
});
