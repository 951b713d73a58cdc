import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { NodePoolRecord } from "../../src/compute/node-pools/node-pool-model.js";
import type { TaskRecord } from "../../src/compute/tasks/task-model.js";
import { VAPP_STATUS } from "../../src/compute/vapps/vapp-model.js";
import type { VAppRecord, VAppTaskRecord } from "../../src/compute/vapps/vapp-model.js";
import { DomainError } from "../../src/errors/domain-error.js";
import type { AuditRecord, GrantRecord, ServiceAccountRecord } from "../../src/identity/identity-model.js";
import { parseScope } from "../../src/identity/scopes.js";
import type { CryptoKeyRecord, CryptoKeyVersionRecord, KeyAggregate } from "../../src/kms/model.js";
import { createLogger } from "../../src/logger.js";
import { ClaimLostError } from "../../src/storage/node-ledger.js";
import { openPostgresStorage } from "../../src/storage/postgres/postgres-storage.js";
import { openSqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import type { Storage } from "../../src/storage/storage.js";
import { createDatabase, postgresAvailable } from "../support/postgres.js";
import { tempDir } from "../support/temp-dir.js";

// The storage suite: every method of every store interface, run against the embedded SQLite store and PostgreSQL
// alike (the same test bodies, one describe per backend). A run without PostgreSQL says on stderr that it skipped it.

interface Opened {
  storage: Storage;
  // Empties every table between tests.
  reset(): Promise<void>;
  cleanup(): Promise<void>;
}

interface Backend {
  name: "sqlite" | "postgres";
  open(): Promise<Opened>;
}

const logger = createLogger("silent");
const pgUp = await postgresAvailable();

const TABLES = [
  "kms_versions",
  "kms_keys",
  "kms_master_key",
  "compute_tasks",
  "compute_node_pools",
  "compute_workers",
  "compute_simulated_nodes",
  "vapp_tasks",
  "vapps",
  "identity_access_tokens",
  "identity_api_keys",
  "identity_grants",
  "identity_service_accounts",
  "audit_batches",
];

const backends: Backend[] = [
  {
    name: "sqlite",
    async open() {
      let dir = tempDir();
      let storage = await openSqliteStorage(dir.path, logger);
      return {
        get storage() {
          return storage;
        },
        // A new data directory is as cheap as emptying one.
        async reset() {
          await storage.close();
          dir.remove();
          dir = tempDir();
          storage = await openSqliteStorage(dir.path, logger);
        },
        async cleanup() {
          await storage.close();
          dir.remove();
        },
      };
    },
  },
  {
    name: "postgres",
    async open() {
      // One database for the file (making one takes a second), emptied between tests.
      const db = await createDatabase();
      const storage = await openPostgresStorage({ url: db.url, poolSize: 4, queryTimeoutMs: 10_000 }, logger);
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      return {
        storage,
        async reset() {
          // DELETE rather than TRUNCATE: on tables this small it is far cheaper than TRUNCATE's new files.
          await client.query(`BEGIN; ${TABLES.map((t) => `DELETE FROM ${t};`).join(" ")} UPDATE identity_generation SET generation = 0; COMMIT`);
        },
        async cleanup() {
          await client.end();
          await storage.close();
          await db.drop();
        },
      };
    },
  },
];

const T = 1_800_000_000_000;

function key(id: string, over: Partial<CryptoKeyRecord> = {}): CryptoKeyRecord {
  return {
    id,
    parentId: "ns",
    name: "",
    description: "",
    owner: "principal-a",
    labels: ["a=b"],
    rotationPeriodMs: null,
    nextRotationAt: null,
    defaultAlgorithm: "AES_256",
    primaryVersionId: 1,
    nextVersionId: 2,
    createdAt: T,
    goneAt: null,
    ...over,
  };
}

function version(keyId: string, id: number, over: Partial<CryptoKeyVersionRecord> = {}): CryptoKeyVersionRecord {
  return { keyId, id, state: "ENABLED", algorithm: "AES_256", createdAt: T, destroyAt: null, wrappedMaterial: Buffer.from(`material-${keyId}-${id}`), ...over };
}

const aggregate = (id: string, over: Partial<CryptoKeyRecord> = {}): KeyAggregate => ({ key: key(id, over), versions: [version(id, 1)] });

function pool(id: string, over: Partial<NodePoolRecord> = {}): NodePoolRecord {
  return {
    id,
    serviceInstanceId: "vdc-a",
    clusterId: "cl-a",
    name: `pool-${id}`,
    computeFlavor: "cpu.2C.8G",
    count: 2,
    state: "PROVISIONING",
    activeTaskId: `task-${id}`,
    pendingName: null,
    createdAt: T,
    modifiedAt: T,
    ...over,
  };
}

function task(id: string, poolId: string, over: Partial<TaskRecord> = {}): TaskRecord {
  return {
    id,
    command: "CreateNodePool",
    status: "PENDING",
    serviceInstanceId: "vdc-a",
    clusterId: "cl-a",
    nodePoolId: poolId,
    change: { name: null, count: 2, stateIfFailed: "ERROR" },
    createdBy: "principal-a",
    createdAt: T,
    modifiedAt: T,
    failure: null,
    result: null,
    attempts: 0,
    ...over,
  };
}

function account(id: string, over: Partial<ServiceAccountRecord> = {}): ServiceAccountRecord {
  return { id, name: `name-${id}`, clientId: `client-${id}`, secretHash: Buffer.alloc(32, 1), createdAt: T, revokedAt: null, ...over };
}

const grant = (id: string, principalId: string, scope = "kms-namespace:ns"): GrantRecord => ({
  id,
  principalId,
  role: "viewer",
  scope: parseScope(scope),
  createdAt: T,
});

function audit(at: number, over: Partial<AuditRecord> = {}): AuditRecord {
  return { at, principal: "principal-a", method: "kms.v1.KeyManagerService/Encrypt", protocol: "grpc", scope: "kms-namespace:ns", resource: "/v1/keys/k1", code: 0, requestId: `r${at}`, ...over };
}

async function domainError(promise: Promise<unknown>): Promise<DomainError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    return err as DomainError;
  }
  throw new Error("expected a DomainError");
}

describe.each(backends)("$name store", (backend) => {
  const skip = backend.name === "postgres" && !pgUp;
  let opened: Opened | null = null;
  let storage: Storage;

  beforeAll(async () => {
    if (!skip) opened = await backend.open();
  });
  beforeEach(async (ctx) => {
    if (opened === null) {
      ctx.skip();
      return;
    }
    await opened.reset();
    storage = opened.storage;
  });
  afterAll(async () => {
    await opened?.cleanup();
  });

  describe("KmsStore", () => {
    it("createKey and getKey: the key and its versions come back as stored; an unknown id is null", async () => {
      await storage.kms.createKey(aggregate("k1", { labels: ["x=1", "y=2"], rotationPeriodMs: 86_400_000, nextRotationAt: T + 5 }), T);
      const got = await storage.kms.getKey("k1");
      expect(got).toEqual({ key: key("k1", { labels: ["x=1", "y=2"], rotationPeriodMs: 86_400_000, nextRotationAt: T + 5 }), versions: [version("k1", 1)] });
      expect(Buffer.isBuffer(got!.versions[0]!.wrappedMaterial)).toBe(true);
      expect(await storage.kms.getKey("nope")).toBeNull();
    });

    it("createKey refuses a name a live key of the namespace holds (ALREADY_EXISTS), and stores nothing", async () => {
      await storage.kms.createKey(aggregate("k1", { name: "payments" }), T);
      const err = await domainError(storage.kms.createKey(aggregate("k2", { name: "payments" }), T));
      expect(err.detail).toMatchObject({ code: "already_exists", reason: "CRYPTO_KEY_NAME_TAKEN" });
      expect(await storage.kms.getKey("k2")).toBeNull();
      // Another namespace, or no name at all, is free.
      await storage.kms.createKey(aggregate("k3", { name: "payments", parentId: "other" }), T);
      await storage.kms.createKey(aggregate("k4"), T);
      await storage.kms.createKey(aggregate("k5"), T);
    });

    it("a gone key's name is free again", async () => {
      await storage.kms.createKey(aggregate("k1", { name: "n", goneAt: T + 10 }), T);
      await domainError(storage.kms.createKey(aggregate("k2", { name: "n" }), T + 5));
      await storage.kms.createKey(aggregate("k2", { name: "n" }), T + 10);
    });

    it("listKeys: live keys of one namespace by createdAt then id, with their primary version, paged", async () => {
      await storage.kms.createKey(aggregate("kb", { createdAt: T + 1 }), T);
      await storage.kms.createKey(aggregate("ka", { createdAt: T + 1 }), T);
      await storage.kms.createKey(aggregate("k0", { createdAt: T }), T);
      await storage.kms.createKey(aggregate("gone", { goneAt: T }), T);
      await storage.kms.createKey(aggregate("none", { primaryVersionId: null }), T);
      await storage.kms.createKey(aggregate("elsewhere", { parentId: "other" }), T);
      const all = await storage.kms.listKeys("ns", T, { limit: 10, offset: 0 });
      expect(all.map((k) => k.key.id)).toEqual(["k0", "none", "ka", "kb"]);
      expect(all[0]!.primary).toEqual(version("k0", 1));
      expect(all[1]!.primary).toBeNull();
      expect((await storage.kms.listKeys("ns", T, { limit: 2, offset: 1 })).map((k) => k.key.id)).toEqual(["none", "ka"]);
    });

    it("mutateKey stores the key and the new or changed versions, and returns the merged aggregate and result", async () => {
      await storage.kms.createKey(aggregate("k1"), T);
      const out = await storage.kms.mutateKey("k1", T, (current) => ({
        key: { ...current.key, nextVersionId: 3, description: "d" },
        versions: [version("k1", 2, { algorithm: "AES_128" }), { ...current.versions[0]!, state: "DISABLED" }],
        result: "done",
      }));
      expect(out!.result).toBe("done");
      expect(out!.aggregate.versions.map((v) => [v.id, v.state])).toEqual([
        [1, "DISABLED"],
        [2, "ENABLED"],
      ]);
      expect(await storage.kms.getKey("k1")).toEqual(out!.aggregate);
      expect(await storage.kms.mutateKey("nope", T, () => Promise.reject(new Error("not called")) as never)).toBeNull();
    });

    // A change of one version read every version of the key: 25 ms of a held event loop at 3,000 (docs/performance.md).
    it("mutateKey with a selection reads those versions and the primary, and tallies the others", async () => {
      const states: CryptoKeyVersionRecord[] = [
        version("k1", 1, { state: "DESTROYED", destroyAt: T - 5, wrappedMaterial: null }),
        version("k1", 2, { state: "DESTROYED_SCHEDULED", destroyAt: T + 50 }),
        version("k1", 3, { state: "DESTROYED_SCHEDULED", destroyAt: T + 90 }),
        version("k1", 4, { state: "DISABLED" }),
        version("k1", 5),
        version("k1", 6, { state: "DESTROYED_SCHEDULED", destroyAt: T + 70 }),
      ];
      await storage.kms.createKey({ key: key("k1", { primaryVersionId: 5, nextVersionId: 7 }), versions: states }, T);
      const seen: unknown[] = [];
      const out = await storage.kms.mutateKey(
        "k1",
        T,
        (current) => {
          seen.push({ ids: current.versions.map((v) => v.id), complete: current.complete, others: current.others });
          return { key: { ...current.key, nextVersionId: 8 }, versions: [{ ...current.versions[0]!, state: "DESTROYED_SCHEDULED", destroyAt: T + 60 }, version("k1", 7)], result: null };
        },
        { ids: [4, 4294967295] },
      );
      // The latest scheduled of the others is version 3's; the version asked for that does not exist (its id the largest a
      // request may name) is left out.
      expect(seen).toEqual([{ ids: [4, 5], complete: false, others: { count: 4, live: 0, latestScheduled: T + 90 } }]);
      expect(out!.aggregate.versions.map((v) => [v.id, v.state])).toEqual([
        [4, "DESTROYED_SCHEDULED"],
        [5, "ENABLED"],
        [7, "ENABLED"],
      ]);
      expect((await storage.kms.getKey("k1"))!.versions.map((v) => [v.id, v.state, v.destroyAt])).toEqual([
        [1, "DESTROYED", T - 5],
        [2, "DESTROYED_SCHEDULED", T + 50],
        [3, "DESTROYED_SCHEDULED", T + 90],
        [4, "DESTROYED_SCHEDULED", T + 60],
        [5, "ENABLED", null],
        [6, "DESTROYED_SCHEDULED", T + 70],
        [7, "ENABLED", null],
      ]);
      // Asking for the versions whose tally decides: the others are then live ones, and the primary alone with none.
      await storage.kms.mutateKey("k1", T, (current) => {
        seen.push({ ids: current.versions.map((v) => v.id), others: current.others });
        return { key: current.key, versions: [], result: null };
      }, { ids: [1, 2, 3, 4, 6] });
      const key2 = await storage.kms.getKey("k1");
      await storage.kms.createKey({ key: key("k2", { primaryVersionId: 1, nextVersionId: 2 }), versions: [version("k2", 1)] }, T);
      await storage.kms.mutateKey("k2", T, (current) => {
        seen.push({ ids: current.versions.map((v) => v.id), others: current.others });
        return { key: current.key, versions: [], result: null };
      }, { ids: [] });
      expect(seen.slice(1)).toEqual([
        { ids: [1, 2, 3, 4, 5, 6], others: { count: 1, live: 1, latestScheduled: null } },
        { ids: [1], others: { count: 0, live: 0, latestScheduled: null } },
      ]);
      expect(await storage.kms.getKey("k1")).toEqual(key2);
    });

    it("mutateKey: a decision that throws, or a rename to a taken name, commits nothing", async () => {
      await storage.kms.createKey(aggregate("k1", { name: "one" }), T);
      await storage.kms.createKey(aggregate("k2", { name: "two" }), T);
      const before = await storage.kms.getKey("k2");
      await expect(
        storage.kms.mutateKey("k2", T, () => {
          throw new Error("refused");
        }),
      ).rejects.toThrow("refused");
      const err = await domainError(storage.kms.mutateKey("k2", T, (c) => ({ key: { ...c.key, name: "one", description: "x" }, versions: [version("k2", 2)], result: null })));
      expect(err.detail.reason).toBe("CRYPTO_KEY_NAME_TAKEN");
      expect(await storage.kms.getKey("k2")).toEqual(before);
    });

    it("concurrent mutations of one key run one after another: every version id once", async () => {
      await storage.kms.createKey(aggregate("k1"), T);
      const ids = await Promise.all(
        Array.from({ length: 20 }, () =>
          storage.kms.mutateKey("k1", T, (c) => ({
            key: { ...c.key, nextVersionId: c.key.nextVersionId + 1 },
            versions: [version("k1", c.key.nextVersionId)],
            result: c.key.nextVersionId,
          })),
        ),
      );
      expect(ids.map((o) => o!.result).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 2));
    });

    it("keysWithDueDestruction and keysWithDueRotation name the keys whose time has come", async () => {
      await storage.kms.createKey({ key: key("d1"), versions: [version("d1", 1, { state: "DESTROYED_SCHEDULED", destroyAt: T + 10 })] }, T);
      await storage.kms.createKey({ key: key("d2"), versions: [version("d2", 1, { state: "DESTROYED", destroyAt: T, wrappedMaterial: null })] }, T);
      await storage.kms.createKey(aggregate("r1", { rotationPeriodMs: 1000, nextRotationAt: T + 10 }), T);
      await storage.kms.createKey(aggregate("r2", { rotationPeriodMs: 1000, nextRotationAt: T + 10, goneAt: T + 5 }), T);
      // Being destroyed, not gone yet: its schedule still moves on (the key manager does not rotate it).
      await storage.kms.createKey(aggregate("r3", { rotationPeriodMs: 1000, nextRotationAt: T + 10, goneAt: T + 11 }), T);
      expect(await storage.kms.keysWithDueDestruction(T + 9, 10)).toEqual([]);
      expect(await storage.kms.keysWithDueDestruction(T + 10, 10)).toEqual(["d1"]);
      expect(await storage.kms.keysWithDueRotation(T + 9, 10)).toEqual([]);
      expect((await storage.kms.keysWithDueRotation(T + 10, 10)).sort()).toEqual(["r1", "r3"]);
      expect(await storage.kms.keysWithDueRotation(T + 11, 10)).toEqual(["r1"]);
      expect(await storage.kms.keysWithDueRotation(T + 10, 0)).toEqual([]);
    });

    // A probe (2026-11-28): the keys due for destruction were read with DISTINCT ... LIMIT and no order, which
    // PostgreSQL answered by walking the primary key past every version erased before (they stay, without material).
    // They are read from the due versions now, the most overdue first.
    it("keysWithDueDestruction names the most overdue keys first, past keys whose versions were erased", async () => {
      const erased = Array.from({ length: 30 }, (_, i) => version("a0", i + 1, { state: "DESTROYED", destroyAt: T, wrappedMaterial: null }));
      await storage.kms.createKey({ key: key("a0"), versions: erased }, T);
      await storage.kms.createKey({ key: key("d1"), versions: [version("d1", 1, { state: "DESTROYED_SCHEDULED", destroyAt: T + 10 })] }, T);
      // Many due versions of one key count once.
      const many = Array.from({ length: 5 }, (_, i) => version("d2", i + 1, { state: "DESTROYED_SCHEDULED", destroyAt: T + 7 }));
      await storage.kms.createKey({ key: key("d2"), versions: many }, T);
      await storage.kms.createKey({ key: key("d3"), versions: [version("d3", 1, { state: "DESTROYED_SCHEDULED", destroyAt: T + 5 })] }, T);
      expect(await storage.kms.keysWithDueDestruction(T + 10, 1)).toEqual(["d3"]);
      expect((await storage.kms.keysWithDueDestruction(T + 10, 2)).sort()).toEqual(["d2", "d3"]);
      expect((await storage.kms.keysWithDueDestruction(T + 10, 10)).sort()).toEqual(["d1", "d2", "d3"]);
      expect(await storage.kms.keysWithDueDestruction(T + 4, 10)).toEqual([]);
    });
  });

  describe("MasterKeyStore", () => {
    const check = { scheme: "hmac-sha256-v1", keyId: "0011223344556677", checkValue: Buffer.alloc(32, 9) };

    it("records the check value once; a later record leaves it", async () => {
      expect(await storage.kms.readMasterKeyCheck()).toBeNull();
      await storage.kms.recordMasterKeyCheck(check, T);
      await storage.kms.recordMasterKeyCheck({ ...check, keyId: "other" }, T);
      expect(await storage.kms.readMasterKeyCheck()).toEqual(check);
    });

    it("holdsKeys, anyWrappedMaterial and countWrappedMaterial see stored, not erased, material", async () => {
      expect([await storage.kms.holdsKeys(), await storage.kms.anyWrappedMaterial(), await storage.kms.countWrappedMaterial()]).toEqual([false, null, 0]);
      await storage.kms.createKey({ key: key("k1"), versions: [version("k1", 1, { state: "DESTROYED", wrappedMaterial: null })] }, T);
      expect([await storage.kms.holdsKeys(), await storage.kms.anyWrappedMaterial(), await storage.kms.countWrappedMaterial()]).toEqual([true, null, 0]);
      await storage.kms.createKey(aggregate("k2"), T);
      expect(await storage.kms.anyWrappedMaterial()).toEqual({ keyId: "k2", versionId: 1, wrappedMaterial: Buffer.from("material-k2-1") });
      expect(await storage.kms.countWrappedMaterial()).toBe(1);
    });

    it("rewrapAll replaces every material and the check value in one transaction; a throw changes nothing", async () => {
      await storage.kms.createKey({ key: key("k1", { nextVersionId: 3 }), versions: [version("k1", 1), version("k1", 2)] }, T);
      await storage.kms.createKey(aggregate("k2"), T);
      await storage.kms.recordMasterKeyCheck(check, T);
      let seen = 0;
      await expect(
        storage.kms.rewrapAll(
          () => {
            if (++seen === 3) throw new Error("cannot unwrap");
            return Buffer.from("new");
          },
          { ...check, keyId: "next" },
          T,
        ),
      ).rejects.toThrow("cannot unwrap");
      expect((await storage.kms.getKey("k1"))!.versions[0]!.wrappedMaterial).toEqual(Buffer.from("material-k1-1"));
      expect(await storage.kms.readMasterKeyCheck()).toEqual(check);
      const order: string[] = [];
      const done = await storage.kms.rewrapAll(
        (m) => {
          order.push(`${m.keyId}/${m.versionId}`);
          return Buffer.from(`re-${Buffer.from(m.wrappedMaterial).toString()}`);
        },
        { ...check, keyId: "next" },
        T,
      );
      expect(done).toBe(3);
      expect(order).toEqual(["k1/1", "k1/2", "k2/1"]);
      expect((await storage.kms.getKey("k2"))!.versions[0]!.wrappedMaterial).toEqual(Buffer.from("re-material-k2-1"));
      expect((await storage.kms.readMasterKeyCheck())!.keyId).toBe("next");
    });
  });

  describe("ComputeStore", () => {
    it("createNodePool, getNodePool and listNodePools (oldest first, per cluster); an unknown id is null", async () => {
      await storage.compute.createNodePool(pool("p1"), task("t1", "p1"));
      await storage.compute.createNodePool(pool("p2"), task("t2", "p2"));
      await storage.compute.createNodePool(pool("p3", { clusterId: "cl-b" }), task("t3", "p3", { clusterId: "cl-b" }));
      expect(await storage.compute.getNodePool("p1")).toEqual(pool("p1"));
      expect(await storage.compute.getNodePool("nope")).toBeNull();
      expect((await storage.compute.listNodePools("vdc-a", "cl-a")).map((p) => p.id)).toEqual(["p1", "p2"]);
      expect(await storage.compute.getTask("t1")).toEqual(task("t1", "p1"));
      expect(await storage.compute.getTask("nope")).toBeNull();
    });

    it("refuses a name taken in the cluster, or held by a pending rename, and stores nothing", async () => {
      await storage.compute.createNodePool(pool("p1", { name: "alpha", pendingName: "beta" }), task("t1", "p1"));
      for (const name of ["alpha", "beta"]) {
        const err = await domainError(storage.compute.createNodePool(pool("p2", { name }), task("t2", "p2")));
        expect(err.detail).toMatchObject({ code: "already_exists", reason: "NODE_POOL_NAME_TAKEN" });
      }
      expect(await storage.compute.getNodePool("p2")).toBeNull();
      expect(await storage.compute.getTask("t2")).toBeNull();
      await storage.compute.createNodePool(pool("p2", { name: "alpha", clusterId: "cl-b" }), task("t2", "p2"));
    });

    it("startPoolTask stores the decided pool and task; null for no pool; a throw or a taken pending name commits nothing", async () => {
      await storage.compute.createNodePool(pool("p1", { name: "alpha", activeTaskId: null }), task("t1", "p1", { status: "SUCCEEDED" }));
      await storage.compute.createNodePool(pool("p2", { name: "gamma", activeTaskId: null }), task("t2", "p2", { status: "SUCCEEDED" }));
      expect(await storage.compute.startPoolTask("nope", () => Promise.reject(new Error("not called")) as never)).toBeNull();
      await expect(
        storage.compute.startPoolTask("p1", () => {
          throw new Error("busy");
        }),
      ).rejects.toThrow("busy");
      const taken = await domainError(
        storage.compute.startPoolTask("p1", (current) => ({ pool: { ...current, pendingName: "gamma", activeTaskId: "t3" }, task: task("t3", "p1") })),
      );
      expect(taken.detail.reason).toBe("NODE_POOL_NAME_TAKEN");
      expect(await storage.compute.getTask("t3")).toBeNull();
      const started = await storage.compute.startPoolTask("p1", (current) => ({
        pool: { ...current, pendingName: "delta", activeTaskId: "t3", state: "RECONCILING" },
        task: task("t3", "p1", { command: "UpdateNodePool" }),
      }));
      expect(started!.task.id).toBe("t3");
      expect(await storage.compute.getNodePool("p1")).toMatchObject({ pendingName: "delta", activeTaskId: "t3", state: "RECONCILING" });
    });

    it("listTasks: newest first, of an instance or of one pool, paged", async () => {
      await storage.compute.createNodePool(pool("p1"), task("t1", "p1"));
      await storage.compute.createNodePool(pool("p2"), task("t2", "p2"));
      await storage.compute.startPoolTask("p1", (c) => ({ pool: c, task: task("t3", "p1") }));
      expect((await storage.compute.listTasks("vdc-a", null, { limit: 10, offset: 0 })).map((t) => t.id)).toEqual(["t3", "t2", "t1"]);
      expect((await storage.compute.listTasks("vdc-a", "p1", { limit: 10, offset: 0 })).map((t) => t.id)).toEqual(["t3", "t1"]);
      expect((await storage.compute.listTasks("vdc-a", null, { limit: 1, offset: 1 })).map((t) => t.id)).toEqual(["t2"]);
      expect(await storage.compute.listTasks("vdc-b", null, { limit: 10, offset: 0 })).toEqual([]);
    });

    it("claimTask takes the oldest PENDING task once; a live worker's task is safe, a silent or retired one's is taken over", async () => {
      await storage.compute.createNodePool(pool("p1"), task("t1", "p1"));
      await storage.compute.createNodePool(pool("p2"), task("t2", "p2"));
      await storage.compute.heartbeat("w1", T, T - 5000);
      const first = await storage.compute.claimTask("w1", T + 1, T - 5000);
      expect(first).toMatchObject({ id: "t1", status: "RUNNING", attempts: 1, modifiedAt: T + 1 });
      expect((await storage.compute.claimTask("w1", T + 2, T - 5000))!.id).toBe("t2");
      expect(await storage.compute.claimTask("w2", T + 3, T - 5000)).toBeNull();
      // w1 stops beating: past its lease, w2 takes its tasks over, oldest first, without moving modifiedAt.
      await storage.compute.heartbeat("w2", T + 6000, T + 1000);
      const takeover = await storage.compute.claimTask("w2", T + 6000, T + 1000);
      expect(takeover).toMatchObject({ id: "t1", status: "RUNNING", attempts: 2, modifiedAt: T + 1 });
      // A worker that retires cleanly hands over at once.
      await storage.compute.retireWorker("w2");
      expect((await storage.compute.claimTask("w3", T + 6001, T + 1000))!.id).toBe("t1");
    });

    it("finishTask records the outcome only for the worker holding the task, and removes the pool when told", async () => {
      await storage.compute.createNodePool(pool("p1"), task("t1", "p1"));
      await storage.compute.heartbeat("w1", T, T);
      await storage.compute.claimTask("w1", T, T);
      const decide = (t: TaskRecord, p: NodePoolRecord | null) => ({
        task: { ...t, status: "SUCCEEDED" as const, modifiedAt: T + 9, result: p },
        pool: p === null ? null : { ...p, state: "RUNNING" as const, activeTaskId: null },
      });
      expect(await storage.compute.finishTask("t1", "w2", decide)).toBeNull();
      const done = await storage.compute.finishTask("t1", "w1", decide);
      expect(done!.task.status).toBe("SUCCEEDED");
      expect(await storage.compute.getTask("t1")).toMatchObject({ status: "SUCCEEDED", modifiedAt: T + 9, result: pool("p1") });
      expect(await storage.compute.getNodePool("p1")).toMatchObject({ state: "RUNNING", activeTaskId: null });
      // Once finished it is no longer held: a second finish stores nothing.
      expect(await storage.compute.finishTask("t1", "w1", decide)).toBeNull();
      await storage.compute.startPoolTask("p1", (c) => ({ pool: { ...c, activeTaskId: "t2" }, task: task("t2", "p1", { command: "DeleteNodePool" }) }));
      await storage.compute.claimTask("w1", T, T);
      await storage.compute.finishTask("t2", "w1", (t) => ({ task: { ...t, status: "SUCCEEDED" }, pool: null }));
      expect(await storage.compute.getNodePool("p1")).toBeNull();
    });

    it("pruneFinishedTasks deletes finished tasks by the time they finished, first finished first, at most the limit; never an unfinished one", async () => {
      await storage.compute.createNodePool(pool("p1", { activeTaskId: null }), task("t1", "p1", { status: "SUCCEEDED", modifiedAt: T + 3 }));
      await storage.compute.createNodePool(pool("p2", { activeTaskId: null }), task("t2", "p2", { status: "FAILED", modifiedAt: T + 1, failure: { kind: "internal" } }));
      await storage.compute.createNodePool(pool("p3", { activeTaskId: null }), task("t3", "p3", { status: "SUCCEEDED", modifiedAt: T + 5 }));
      await storage.compute.createNodePool(pool("p4"), task("p4-pending", "p4", { status: "PENDING", createdAt: T - 1000, modifiedAt: T - 1000 }));
      await storage.compute.createNodePool(pool("p5"), task("p5-running", "p5", { status: "RUNNING", createdAt: T - 1000, modifiedAt: T - 1000 }));
      expect(await storage.compute.pruneFinishedTasks(T + 4, 1)).toBe(1);
      expect(await storage.compute.getTask("t2")).toBeNull();
      expect(await storage.compute.pruneFinishedTasks(T + 4, 10)).toBe(1);
      expect(await storage.compute.pruneFinishedTasks(T + 4, 10)).toBe(0);
      expect((await storage.compute.listTasks("vdc-a", null, { limit: 10, offset: 0 })).map((t) => t.id)).toEqual(["p5-running", "p4-pending", "t3"]);
      // Every pool stays; a claim still finds the unfinished tasks.
      expect((await storage.compute.listNodePools("vdc-a", "cl-a")).map((p) => p.id)).toEqual(["p1", "p2", "p3", "p4", "p5"]);
      expect((await storage.compute.claimTask("w1", T, T))!.id).toBe("p4-pending");
    });
  });

  describe("VAppStore", () => {
    const vapp = (id: string, over: Partial<VAppRecord> = {}): VAppRecord => ({
      id,
      name: `name-${id}`,
      description: "d",
      serviceInstanceId: "vdc-a",
      templateId: "tpl-1",
      networkName: "net-1",
      deploy: true,
      powerOn: false,
      status: VAPP_STATUS.UNRESOLVED,
      deployed: false,
      createdBy: "principal-a",
      createdAt: T,
      modifiedAt: T,
      taskId: `task-${id}`,
      ...over,
    });
    const vappTask = (v: VAppRecord): VAppTaskRecord => ({
      id: v.taskId,
      command: "InstantiateVAppTemplate",
      status: "running",
      vappId: v.id,
      vappName: v.name,
      serviceInstanceId: v.serviceInstanceId,
      createdBy: v.createdBy,
      createdAt: T,
      endedAt: null,
      failure: null,
      attempts: 0,
    });

    it("createVApp, getVApp and getVAppTask; a name taken in the vDC is ALREADY_EXISTS and stores nothing", async () => {
      const a = vapp("v1");
      await storage.vapps.createVApp(a, vappTask(a));
      expect(await storage.vapps.getVApp("v1")).toEqual(a);
      expect(await storage.vapps.getVAppTask("task-v1")).toEqual(vappTask(a));
      expect(await storage.vapps.getVApp("none")).toBeNull();
      const twin = vapp("v2", { name: a.name });
      expect((await domainError(storage.vapps.createVApp(twin, vappTask(twin)))).detail).toMatchObject({ code: "already_exists", reason: "VAPP_NAME_TAKEN" });
      expect(await storage.vapps.getVApp("v2")).toBeNull();
      expect(await storage.vapps.getVAppTask("task-v2")).toBeNull();
      // The same name in another vDC is free.
      const elsewhere = vapp("v3", { name: a.name, serviceInstanceId: "vdc-b" });
      await storage.vapps.createVApp(elsewhere, vappTask(elsewhere));
      expect(await storage.vapps.getVApp("v3")).toEqual(elsewhere);
    });

    it("claimTask takes a running task once, a silent worker's is taken over; finishVAppTask only by its holder", async () => {
      const a = vapp("v1");
      await storage.vapps.createVApp(a, vappTask(a));
      await storage.compute.heartbeat("w1", T, T - 5000);
      expect(await storage.vapps.claimTask("w1", T, T - 5000)).toMatchObject({ id: "task-v1", attempts: 1 });
      expect(await storage.vapps.claimTask("w2", T, T - 5000)).toBeNull();
      await storage.compute.heartbeat("w2", T + 6000, T + 1000);
      expect(await storage.vapps.claimTask("w2", T + 6000, T + 1000)).toMatchObject({ id: "task-v1", attempts: 2 });
      const decide = (t: VAppTaskRecord, v: VAppRecord) => ({
        task: { ...t, status: "success" as const, endedAt: T + 7000 },
        vapp: { ...v, status: VAPP_STATUS.POWERED_OFF, deployed: true, modifiedAt: T + 7000 },
      });
      expect(await storage.vapps.finishVAppTask("task-v1", "w1", decide)).toBeNull();
      expect((await storage.vapps.finishVAppTask("task-v1", "w2", decide))!.task.status).toBe("success");
      expect(await storage.vapps.getVApp("v1")).toMatchObject({ status: VAPP_STATUS.POWERED_OFF, deployed: true, modifiedAt: T + 7000 });
      expect(await storage.vapps.getVAppTask("task-v1")).toMatchObject({ status: "success", endedAt: T + 7000 });
      // A finished task is claimed by nobody.
      expect(await storage.vapps.claimTask("w2", T + 8000, T + 1000)).toBeNull();
    });

    it("pruneFinishedTasks deletes finished tasks by endedAt, first ended first, at most the limit; never a running or queued one; the vApp stays", async () => {
      const made = [
        { v: vapp("v1"), over: { status: "success" as const, endedAt: T + 3 } },
        { v: vapp("v2"), over: { status: "error" as const, endedAt: T + 1, failure: { kind: "internal" as const } } },
        { v: vapp("v3"), over: { status: "success" as const, endedAt: T + 5 } },
        { v: vapp("v4"), over: { status: "running" as const, createdAt: T - 1000 } },
        { v: vapp("v5"), over: { status: "queued" as const, createdAt: T - 1000 } },
      ];
      for (const { v, over } of made) await storage.vapps.createVApp(v, { ...vappTask(v), ...over });
      expect(await storage.vapps.pruneFinishedTasks(T + 4, 1)).toBe(1);
      expect(await storage.vapps.getVAppTask("task-v2")).toBeNull();
      expect(await storage.vapps.pruneFinishedTasks(T + 4, 10)).toBe(1);
      expect(await storage.vapps.pruneFinishedTasks(T + 4, 10)).toBe(0);
      const left = [];
      for (const { v } of made) if ((await storage.vapps.getVAppTask(v.taskId)) !== null) left.push(v.taskId);
      expect(left).toEqual(["task-v3", "task-v4", "task-v5"]);
      expect(await storage.vapps.getVApp("v1")).toEqual(vapp("v1"));
    });
  });

  describe("NodeLedger", () => {
    // Ledger writes are made for a task its worker holds (TaskClaim).
    const claim = { taskId: "t1", workerId: "w1" };
    beforeEach(async () => {
      await storage.compute.createNodePool(pool("p1"), task("t1", "p1"));
      await storage.compute.heartbeat("w1", T, T - 5000);
      expect((await storage.compute.claimTask("w1", T, T - 5000))!.id).toBe("t1");
    });

    it("reserve within capacity, refused with what is free; setReady, settle, release and get", async () => {
      expect(await storage.ledger.get("p1")).toBeNull();
      expect(await storage.ledger.reserve(claim, "cl-a", "p1", 3, 5)).toEqual({ ok: true });
      expect(await storage.ledger.reserve(claim, "cl-a", "p2", 3, 5)).toEqual({ ok: false, free: 2 });
      expect(await storage.ledger.reserve(claim, "cl-a", "p2", 2, 5)).toEqual({ ok: true });
      // A reservation at or above what is asked is kept.
      expect(await storage.ledger.reserve(claim, "cl-a", "p1", 1, 5)).toEqual({ ok: true });
      await storage.ledger.setReady(claim, "p1", 2);
      expect(await storage.ledger.get("p1")).toEqual({ clusterId: "cl-a", nodePoolId: "p1", reserved: 3, ready: 2 });
      await storage.ledger.settle(claim, "cl-a", "p1", 1);
      expect(await storage.ledger.get("p1")).toEqual({ clusterId: "cl-a", nodePoolId: "p1", reserved: 1, ready: 1 });
      await storage.ledger.release(claim, "p1");
      expect(await storage.ledger.get("p1")).toBeNull();
      expect(await storage.ledger.reserve(claim, "cl-a", "p3", 3, 5)).toEqual({ ok: true });
    });

    it("concurrent reservations in one cluster never exceed its capacity", async () => {
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => storage.ledger.reserve(claim, "cl-a", `p${i}`, 1, 4)));
      expect(results.filter((r) => r.ok).length).toBe(4);
    });

    // A worker silent past its lease kept writing after another took the task over, and recreated the nodes of a pool
    // the other had deleted, holding their capacity for good (a probe, 2026-11-28).
    it("changes nothing for a worker that no longer holds the task", async () => {
      expect(await storage.ledger.reserve(claim, "cl-a", "p1", 2, 5)).toEqual({ ok: true });
      await storage.compute.heartbeat("w2", T + 6000, T + 1000);
      expect((await storage.compute.claimTask("w2", T + 6000, T + 1000))!.id).toBe("t1");
      await storage.ledger.release({ taskId: "t1", workerId: "w2" }, "p1");
      const lost = [
        () => storage.ledger.reserve(claim, "cl-a", "p1", 3, 5),
        () => storage.ledger.setReady(claim, "p1", 1),
        () => storage.ledger.settle(claim, "cl-a", "p1", 3),
        () => storage.ledger.release(claim, "p9"),
        () => storage.ledger.reserve({ taskId: "no-such-task", workerId: "w2" }, "cl-a", "p1", 3, 5),
      ];
      for (const write of lost) await expect(write()).rejects.toBeInstanceOf(ClaimLostError);
      expect(await storage.ledger.get("p1")).toBeNull();
    });
  });

  describe("IdentityStore", () => {
    it("accounts: create with grants, find by client id, id or name, list, revoke with their credentials", async () => {
      expect(await storage.identity.hasNoAccounts()).toBe(true);
      const g0 = await storage.identity.generation();
      await storage.identity.createServiceAccount(account("a1"), [grant("g1", "a1")]);
      await storage.identity.createServiceAccount(account("a2", { createdAt: T + 1 }), []);
      expect(await storage.identity.hasNoAccounts()).toBe(false);
      expect(await storage.identity.generation()).toBeGreaterThan(g0);
      expect(await storage.identity.serviceAccountByClientId("client-a1")).toEqual(account("a1"));
      expect(await storage.identity.serviceAccountByClientId("nope")).toBeNull();
      expect(await storage.identity.serviceAccount("a1")).toEqual(account("a1"));
      expect(await storage.identity.serviceAccount("name-a2")).toEqual(account("a2", { createdAt: T + 1 }));
      expect((await storage.identity.listServiceAccounts()).map((a) => a.id)).toEqual(["a1", "a2"]);
      await storage.identity.insertAccessToken({ id: "t1", principalId: "a1", secretHash: Buffer.alloc(32, 2), createdAt: T, expiresAt: T + 10, revokedAt: null });
      await storage.identity.insertApiKey({ id: "k1", principalId: "a1", workspaceId: "ws", secretHash: Buffer.alloc(32, 3), createdAt: T, revokedAt: null });
      expect(await storage.identity.revokeServiceAccount("a1", T + 5)).toBe(true);
      expect(await storage.identity.revokeServiceAccount("a1", T + 6)).toBe(false);
      expect((await storage.identity.accessTokenCheck("t1"))).toMatchObject({ record: { revokedAt: T + 5 }, accountRevokedAt: T + 5 });
      expect((await storage.identity.apiKeyCheck("k1"))).toMatchObject({ record: { revokedAt: T + 5 }, accountRevokedAt: T + 5 });
    });

    it("access tokens: insert, check with the generation, revoke, forget expired", async () => {
      await storage.identity.createServiceAccount(account("a1"), []);
      const token = { id: "t1", principalId: "a1", secretHash: Buffer.alloc(32, 2), createdAt: T, expiresAt: T + 10, revokedAt: null };
      const g = await storage.identity.generation();
      await storage.identity.insertAccessToken(token);
      expect(await storage.identity.generation()).toBe(g);
      expect(await storage.identity.accessTokenCheck("t1")).toEqual({ record: token, accountRevokedAt: null, generation: g });
      expect(await storage.identity.accessTokenCheck("nope")).toBeNull();
      expect(await storage.identity.revokeAccessTokens("a1", T + 1)).toBe(1);
      expect((await storage.identity.accessTokenCheck("t1"))!.record.revokedAt).toBe(T + 1);
      expect(await storage.identity.deleteExpiredAccessTokens(T + 10)).toBe(0);
      expect(await storage.identity.deleteExpiredAccessTokens(T + 11)).toBe(1);
      expect(await storage.identity.accessTokenCheck("t1")).toBeNull();
    });

    it("API keys: insert, check, list (all or one principal's), revoke once", async () => {
      await storage.identity.createServiceAccount(account("a1"), []);
      await storage.identity.createServiceAccount(account("a2"), []);
      const k1 = { id: "k1", principalId: "a1", workspaceId: "ws", secretHash: Buffer.alloc(32, 3), createdAt: T, revokedAt: null };
      const k2 = { ...k1, id: "k2", principalId: "a2", createdAt: T + 1 };
      await storage.identity.insertApiKey(k1);
      await storage.identity.insertApiKey(k2);
      expect((await storage.identity.apiKeyCheck("k1"))!.record).toEqual(k1);
      expect((await storage.identity.listApiKeys()).map((k) => k.id)).toEqual(["k1", "k2"]);
      expect(await storage.identity.listApiKeys("a2")).toEqual([k2]);
      expect(await storage.identity.revokeApiKey("k1", T + 2)).toBe(true);
      expect(await storage.identity.revokeApiKey("k1", T + 3)).toBe(false);
      expect((await storage.identity.apiKeyCheck("k1"))!.record.revokedAt).toBe(T + 2);
    });

    it("grants: insert once (the same grant again returns the stored one), list, delete; each change moves the generation", async () => {
      await storage.identity.createServiceAccount(account("a1"), []);
      await storage.identity.createServiceAccount(account("a2"), []);
      const g = await storage.identity.generation();
      expect(await storage.identity.insertGrant(grant("g1", "a1"))).toEqual(grant("g1", "a1"));
      expect(await storage.identity.insertGrant(grant("g-again", "a1"))).toEqual(grant("g1", "a1"));
      await storage.identity.insertGrant(grant("g2", "a2", "*"));
      expect(await storage.identity.generation()).toBeGreaterThan(g);
      expect(await storage.identity.grantsOf("a1")).toEqual([grant("g1", "a1")]);
      expect((await storage.identity.listGrants()).map((x) => x.id)).toEqual(["g1", "g2"]);
      expect((await storage.identity.listGrants("a2")).map((x) => x.id)).toEqual(["g2"]);
      expect(await storage.identity.deleteGrant("g1")).toBe(true);
      expect(await storage.identity.deleteGrant("g1")).toBe(false);
      expect(await storage.identity.grantsOf("a1")).toEqual([]);
    });
  });

  describe("AuditStore", () => {
    it("appends batches and queries by time, principal and resource, oldest first, limited", async () => {
      await storage.audit.append([audit(T), audit(T + 1, { principal: "principal-b", resource: "/v1/keys/k1/versions/2" })]);
      await storage.audit.append([audit(T + 2, { resource: "/v1/keys/k10", scope: "kms-namespace:other" })]);
      await storage.audit.append([]);
      expect((await storage.audit.query({ limit: 10 })).map((r) => r.at)).toEqual([T, T + 1, T + 2]);
      expect(await storage.audit.query({ limit: 1 })).toEqual([audit(T)]);
      expect((await storage.audit.query({ since: T + 1, until: T + 2, limit: 10 })).map((r) => r.at)).toEqual([T + 1]);
      expect((await storage.audit.query({ principal: "principal-b", limit: 10 })).map((r) => r.at)).toEqual([T + 1]);
      // A resource path and everything under it, not a longer id with the same start.
      expect((await storage.audit.query({ resource: "/v1/keys/k1", limit: 10 })).map((r) => r.at)).toEqual([T, T + 1]);
      expect((await storage.audit.query({ resource: "kms-namespace:other", limit: 10 })).map((r) => r.at)).toEqual([T + 2]);
    });

    // Several servers on one PostgreSQL database store their batches in an order that is not their times' (a probe,
    // 2026-11-27: records listed out of order, and paging by the last record's time skipped some). SQLite has one
    // server, whose batches follow each other in time.
    it.skipIf(backend.name !== "postgres")("lists the records of batches stored out of time order oldest first, and pages by time without a gap", async () => {
      await storage.audit.append([audit(T), audit(T + 30)]);
      await storage.audit.append([audit(T + 10), audit(T + 20)]);
      await storage.audit.append([audit(T + 5)]);
      expect((await storage.audit.query({ limit: 10 })).map((r) => r.at)).toEqual([T, T + 5, T + 10, T + 20, T + 30]);
      const first = await storage.audit.query({ limit: 2 });
      expect(first.map((r) => r.at)).toEqual([T, T + 5]);
      // The operator command's hint: the next page from the last record's time, that millisecond shown again.
      expect((await storage.audit.query({ since: T + 5, limit: 2 })).map((r) => r.at)).toEqual([T + 5, T + 10]);
      expect((await storage.audit.query({ since: T + 11, until: T + 31, limit: 10 })).map((r) => r.at)).toEqual([T + 20, T + 30]);
    });

    it("stores a batch larger than one statement takes", async () => {
      await storage.audit.append(Array.from({ length: 2500 }, (_, i) => audit(T + i)));
      expect((await storage.audit.query({ limit: 5000 })).length).toBe(2500);
    });

    it("prunes only batches whose every record is older than the time, oldest first, at most the limit", async () => {
      await storage.audit.append([audit(T), audit(T + 1)]);
      await storage.audit.append([audit(T + 2), audit(T + 3)]);
      // Newer by its latest record only: it must stay whole until its latest record is old enough.
      await storage.audit.append([audit(T + 4), audit(T + 10)]);
      await storage.audit.append([audit(T + 20)]);
      expect(await storage.audit.prune(T, 10)).toBe(0);
      expect(await storage.audit.prune(T + 10, 1)).toBe(1);
      expect((await storage.audit.query({ limit: 10 })).map((r) => r.at)).toEqual([T + 2, T + 3, T + 4, T + 10, T + 20]);
      expect(await storage.audit.prune(T + 10, 10)).toBe(1);
      expect((await storage.audit.query({ limit: 10 })).map((r) => r.at)).toEqual([T + 4, T + 10, T + 20]);
      expect(await storage.audit.prune(T + 11, 10)).toBe(1);
      expect(await storage.audit.query({ limit: 10 })).toEqual([audit(T + 20)]);
      // What remains is still appended to and read as before.
      await storage.audit.append([audit(T + 30)]);
      expect((await storage.audit.query({ since: T + 15, limit: 10 })).map((r) => r.at)).toEqual([T + 20, T + 30]);
    });
  });

  describe("Storage", () => {
    it("exclusively runs the start-up steps and returns what they return", async () => {
      expect(await storage.exclusively(async () => 42)).toBe(42);
      await expect(storage.exclusively(() => Promise.reject(new Error("bad master key")))).rejects.toThrow("bad master key");
      expect(await storage.exclusively(async () => "again")).toBe("again");
    });
  });
});
