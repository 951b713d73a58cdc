import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { KeyCache } from "../../src/kms/key-cache.js";
import { KeyManager } from "../../src/kms/key-manager.js";
import { MasterKey } from "../../src/kms/master-key.js";
import type { KeyAggregate } from "../../src/kms/model.js";
import { createLogger } from "../../src/logger.js";
import { FEED_APPLICATION_NAME } from "../../src/storage/postgres/change-feed.js";
import { openPostgresStorage } from "../../src/storage/postgres/postgres-storage.js";
import type { ChangeListener, Storage } from "../../src/storage/storage.js";
import { FakeClock } from "../support/fake-clock.js";
import { createDatabase, postgresAvailable } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";

// What only a shared store has: several servers (here, several storages with pools of their own) on one PostgreSQL
// database, starting at once, numbering versions of one key, claiming tasks, and hearing of each other's changes.

const logger = createLogger("silent");
const pgUp = await postgresAvailable();
const T = 1_800_000_000_000;

// Records what a storage's change feed announces.
class Heard implements ChangeListener {
  keys: string[] = [];
  access = 0;
  stored = 0;
  finished: string[] = [];
  live: boolean[] = [];
  keyChanged(keyId: string): void {
    this.keys.push(keyId);
  }
  accessChanged(): void {
    this.access++;
  }
  taskStored(): void {
    this.stored++;
  }
  taskFinished(taskId: string): void {
    this.finished.push(taskId);
  }
  feedLive(live: boolean): void {
    this.live.push(live);
  }
}

async function until(what: () => boolean, withinMs: number): Promise<number> {
  const start = Date.now();
  while (!what()) {
    if (Date.now() - start > withinMs) throw new Error(`not within ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
  return Date.now() - start;
}

const aggregate = (id: string): KeyAggregate => ({
  key: {
    id,
    parentId: "ns",
    name: "",
    description: "",
    owner: "p",
    labels: [],
    rotationPeriodMs: null,
    nextRotationAt: null,
    defaultAlgorithm: "AES_256",
    primaryVersionId: 1,
    nextVersionId: 2,
    createdAt: T,
    goneAt: null,
  },
  versions: [{ keyId: id, id: 1, state: "ENABLED", algorithm: "AES_256", createdAt: T, destroyAt: null, wrappedMaterial: Buffer.from("m") }],
});

describe.skipIf(!pgUp)("several servers on one PostgreSQL database", () => {
  let db: TestDatabase;
  let servers: Storage[] = [];
  const heard: Heard[] = [];

  beforeAll(async () => {
    db = await createDatabase();
    // Started at once on an empty database: the migrations run once, under the start-up lock.
    servers = await Promise.all([0, 1, 2].map(() => openPostgresStorage({ url: db.url, poolSize: 4, queryTimeoutMs: 10_000 }, logger)));
    for (const s of servers) {
      const h = new Heard();
      heard.push(h);
      await s.watch(h);
    }
  });
  afterAll(async () => {
    for (const s of servers) await s.close();
    await db?.drop();
  });

  it("migrated once, and every feed is live", async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const { rows } = await client.query("SELECT version FROM schema_migrations ORDER BY version");
    await client.end();
    expect(rows.map((r: { version: number }) => r.version)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    expect(heard.map((h) => h.live)).toEqual([[true], [true], [true]]);
  });

  it("numbers 60 versions created at once through three servers 2..61, each once", async () => {
    await servers[0]!.kms.createKey(aggregate("k-many"), T);
    const made = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        servers[i % 3]!.kms.mutateKey("k-many", T, (c) => ({
          key: { ...c.key, nextVersionId: c.key.nextVersionId + 1 },
          versions: [{ ...c.versions[0]!, id: c.key.nextVersionId }],
          result: c.key.nextVersionId,
        })),
      ),
    );
    expect(made.map((m) => m!.result).sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, i) => i + 2));
    expect((await servers[2]!.kms.getKey("k-many"))!.versions.map((v) => v.id)).toEqual(Array.from({ length: 61 }, (_, i) => i + 1));
  });

  it("announces a key's change, an access change, a stored task and a finished one to every server within a second", async () => {
    await servers[0]!.kms.createKey(aggregate("k-feed"), T);
    await servers[0]!.kms.mutateKey("k-feed", T, (c) => ({ key: c.key, versions: [], result: null }));
    for (const h of heard) expect(await until(() => h.keys.includes("k-feed"), 1000)).toBeLessThan(1000);
    const access = heard.map((h) => h.access);
    await servers[1]!.identity.createServiceAccount(
      { id: "a1", name: "a-one", clientId: "c1", secretHash: Buffer.alloc(32), createdAt: T, revokedAt: null },
      [],
    );
    for (const [i, h] of heard.entries()) await until(() => h.access > access[i]!, 1000);
    const pool = {
      id: "p1",
      serviceInstanceId: "vdc",
      clusterId: "cl",
      name: "pool-one",
      computeFlavor: "f",
      count: 1,
      state: "PROVISIONING" as const,
      activeTaskId: "t1",
      pendingName: null,
      createdAt: T,
      modifiedAt: T,
    };
    const task = {
      id: "t1",
      command: "CreateNodePool" as const,
      status: "PENDING" as const,
      serviceInstanceId: "vdc",
      clusterId: "cl",
      nodePoolId: "p1",
      change: { name: null, count: 1, stateIfFailed: "ERROR" as const },
      createdBy: "a1",
      createdAt: T,
      modifiedAt: T,
      failure: null,
      result: null,
      attempts: 0,
    };
    const stored = heard.map((h) => h.stored);
    await servers[2]!.compute.createNodePool(pool, task);
    for (const [i, h] of heard.entries()) await until(() => h.stored > stored[i]!, 1000);
    await servers[0]!.compute.heartbeat("w0", T, T);
    expect((await servers[0]!.compute.claimTask("w0", T, T))!.id).toBe("t1");
    await servers[0]!.compute.finishTask("t1", "w0", (t, p) => ({ task: { ...t, status: "SUCCEEDED" }, pool: p }));
    for (const h of heard) await until(() => h.finished.includes("t1"), 1000);
  });

  // Three rounds: a claim that raced another for a row must see that row's new owner (a first version of the claim
  // took a just-claimed task again now and then).
  it("gives each of 3 x 30 tasks to exactly one of three servers claiming at once", async () => {
    await Promise.all(servers.map((s, i) => s.compute.heartbeat(`w${i}`, T, T - 5000)));
    for (let round = 0; round < 3; round++) {
      const ids: string[] = [];
      for (let i = 0; i < 30; i++) {
        const id = `q${round}-${i}`;
        ids.push(`t${id}`);
        await servers[0]!.compute.createNodePool(
          { id, serviceInstanceId: "vdc", clusterId: "cl-q", name: `pool-${id}`, computeFlavor: "f", count: 1, state: "PROVISIONING", activeTaskId: `t${id}`, pendingName: null, createdAt: T, modifiedAt: T },
          { id: `t${id}`, command: "CreateNodePool", status: "PENDING", serviceInstanceId: "vdc", clusterId: "cl-q", nodePoolId: id, change: { name: null, count: 1, stateIfFailed: "ERROR" }, createdBy: "a1", createdAt: T, modifiedAt: T, failure: null, result: null, attempts: 0 },
        );
      }
      const claimed = await Promise.all(
        servers.map(async (s, i) => {
          const mine: string[] = [];
          for (;;) {
            const t = await s.compute.claimTask(`w${i}`, T, T - 5000);
            if (t === null) return mine;
            mine.push(t.id);
          }
        }),
      );
      expect(claimed.flat().sort()).toEqual(ids.sort());
    }
  });

  it("rotates a due key and erases a due version once, whichever of the three servers' sweepers find them at once", async () => {
    const clock = new FakeClock();
    const master = new MasterKey(randomBytes(32));
    const managers = servers.map((s) => new KeyManager(s.kms, new KeyCache(master, 100), master, clock, { destroyGraceMs: 1000 }));
    const rotating = await managers[0]!.createKey({ parentId: "sweep", name: "", description: "", labels: [], rotationPeriodMs: 60_000, defaultAlgorithm: "AES_256", owner: "p" });
    const destroying = await managers[0]!.createKey({ parentId: "sweep", name: "", description: "", labels: [], rotationPeriodMs: null, defaultAlgorithm: "AES_256", owner: "p" });
    await managers[1]!.createVersion(destroying.key.id, null);
    await managers[1]!.setPrimary(destroying.key.id, 2);
    await managers[2]!.transition(destroying.key.id, 1, "destroy");
    clock.advance(60_000);
    await Promise.all(managers.map((m) => Promise.all([m.rotateDue(), m.sweepDestroyed()])));
    const rotated = (await servers[0]!.kms.getKey(rotating.key.id))!;
    expect(rotated.versions.map((v) => v.id)).toEqual([1, 2]);
    expect(rotated.key).toMatchObject({ primaryVersionId: 2, nextRotationAt: rotating.key.createdAt + 120_000 });
    const swept = (await servers[0]!.kms.getKey(destroying.key.id))!;
    expect(swept.versions.map((v) => [v.id, v.state, v.wrappedMaterial === null])).toEqual([
      [1, "DESTROYED", true],
      [2, "ENABLED", false],
    ]);
  });

  it("a server whose listening connection is cut stops trusting its cache within a second, and trusts it again once back", async () => {
    const h = heard[1]!;
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    const before = h.live.length;
    const started = Date.now();
    try {
      // Every server's listening connection is cut, as a network failure or a restart of PostgreSQL would.
      const listening = "datname = current_database() AND application_name = $1";
      const { rows } = await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE ${listening}`, [FEED_APPLICATION_NAME]);
      expect(rows.length).toBe(3);
      await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE ${listening}`, [FEED_APPLICATION_NAME]);
    } finally {
      await admin.end();
    }
    await until(() => h.live.length > before && h.live.at(-1) === false, 1000);
    expect(Date.now() - started).toBeLessThan(1000);
    await until(() => h.live.at(-1) === true, 5000);
  });
});
