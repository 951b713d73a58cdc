import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DomainError } from "../../src/errors/domain-error.js";
import { KeyCache } from "../../src/kms/key-cache.js";
import { KeyManager } from "../../src/kms/key-manager.js";
import { MasterKey } from "../../src/kms/master-key.js";
import { openDatabase } from "../../src/storage/sqlite/database.js";
import { SqliteKmsStore } from "../../src/storage/sqlite/sqlite-kms-store.js";
import { FakeClock } from "../support/fake-clock.js";
import { storeSnapshot } from "../support/store-snapshot.js";
import { tempDir } from "../support/temp-dir.js";
import { injectWriteFailure } from "../support/write-failure.js";

// A KeyManager mutation that fails commits nothing, and the cache keeps serving what was committed before: the
// cache entry of an outcome is built inside the store's transaction (so a master key that cannot unwrap aborts the
// write) and installed only after the commit (so a write that fails leaves the cache alone).

const DAY = 24 * 3600 * 1000;
const GRACE = 7 * DAY;
const NO_AAD = new Uint8Array();

// What a call threw: a domain error's reason, "fault" for anything else (which the caller sees as INTERNAL), or
// "no error".
function outcomeOf(call: () => unknown): Promise<string> {
  return Promise.resolve()
    .then(call)
    .then(
      () => "no error",
      (err: unknown) => (err instanceof DomainError ? err.detail.reason : "fault"),
    );
}

describe("KeyManager: a failed mutation", () => {
  let dir: ReturnType<typeof tempDir>;
  let store: SqliteKmsStore;
  let clock: FakeClock;
  const right = new MasterKey(randomBytes(32));
  const wrong = new MasterKey(randomBytes(32));

  // Each manager has a cache of its own, as a server started with that master key would.
  const managerWith = (master: MasterKey) => new KeyManager(store, new KeyCache(master, 1000), master, clock, { destroyGraceMs: GRACE });

  const newKey = (manager: KeyManager, rotationPeriodMs: number | null = null) =>
    manager.createKey({ parentId: "ns", name: "", description: "", labels: [], rotationPeriodMs, defaultAlgorithm: "AES_256", owner: "a" });

  // Runs a call that must fail and says how (see outcomeOf), after checking that every row of the store is as
  // before.
  async function failsCommittingNothing(call: () => Promise<unknown>): Promise<string> {
    const before = storeSnapshot(dir.path);
    const outcome = await outcomeOf(call);
    expect(outcome).not.toBe("no error");
    expect(storeSnapshot(dir.path)).toEqual(before);
    return outcome;
  }

  beforeEach(() => {
    dir = tempDir();
    store = new SqliteKmsStore(openDatabase(dir.path, "upgrade"));
    clock = new FakeClock();
  });

  afterEach(async () => {
    await store.close();
    dir.remove();
  });

  it("under a wrong master key commits nothing: new version, transition, update, primary change", async () => {
    const manager = managerWith(right);
    const { key } = await newKey(manager);
    await manager.createVersion(key.id, null);
    const sealed = await manager.encrypt(key.id, 1, Buffer.from("old"), NO_AAD);

    const misconfigured = managerWith(wrong);
    // A fault of the server, not of the caller: no domain error, so the caller gets INTERNAL.
    expect(await failsCommittingNothing(() => misconfigured.createVersion(key.id, null))).toBe("fault");
    expect(await failsCommittingNothing(() => misconfigured.transition(key.id, 2, "disable"))).toBe("fault");
    expect(await failsCommittingNothing(() => misconfigured.updateKey(key.id, { description: "x" }))).toBe("fault");
    expect(await failsCommittingNothing(() => misconfigured.setPrimary(key.id, 2))).toBe("fault");

    // Back on the right master key, with a cache that starts empty as after a restart.
    const restarted = managerWith(right);
    expect(Buffer.from((await restarted.decrypt(key.id, sealed, NO_AAD)).plaintext).toString()).toBe("old");
    expect((await restarted.createVersion(key.id, null)).id).toBe(3);
    expect((await restarted.getVersion(key.id, 2)).state).toBe("ENABLED");
  });

  it("under a wrong master key, rotation and the sweeper commit nothing", async () => {
    const manager = managerWith(right);
    const rotating = await newKey(manager, DAY);
    const destroying = await newKey(manager);
    await manager.createVersion(destroying.key.id, null);
    await manager.transition(destroying.key.id, 2, "destroy");
    clock.advance(GRACE);

    const misconfigured = managerWith(wrong);
    await failsCommittingNothing(() => misconfigured.rotateDue());
    await failsCommittingNothing(() => misconfigured.sweepDestroyed());

    expect(await manager.rotateDue()).toBe(1);
    expect((await manager.getKey(rotating.key.id)).primary?.id).toBe(2);
    expect(await manager.sweepDestroyed()).toBe(1);
    expect((await store.getKey(destroying.key.id))?.versions[1]).toMatchObject({ state: "DESTROYED", wrappedMaterial: null });
  });

  it("adds no version to a key without an ENABLED version (being destroyed), by call or by rotation, under either master key", async () => {
    // Nothing of such a key is unwrapped to build its cache entry, so a version wrapped under a wrong master key
    // would go unnoticed; the key's pending destruction refuses it before that matters.
    const manager = managerWith(right);
    const { key } = await newKey(manager, DAY);
    await manager.destroyKey(key.id);
    await manager.transition(key.id, 1, "restore");
    clock.advance(DAY);

    const misconfigured = managerWith(wrong);
    for (const m of [misconfigured, manager]) {
      expect(await failsCommittingNothing(() => m.createVersion(key.id, null))).toBe("CRYPTO_KEY_DESTRUCTION_SCHEDULED");
      // Rotation moves the key's schedule on (it needs no material for that), and adds no version.
      await m.rotateDue();
      expect((await store.getKey(key.id))?.versions.map((v) => v.id)).toEqual([1]);
      clock.advance(DAY);
    }

    await manager.transition(key.id, 1, "enable");
    const v2 = await manager.createVersion(key.id, null);
    expect(v2.id).toBe(2);
    const sealed = await manager.encrypt(key.id, 2, Buffer.from("new"), NO_AAD);
    expect(Buffer.from((await managerWith(right).decrypt(key.id, sealed, NO_AAD)).plaintext).toString()).toBe("new");
  });

  it("that failed in storage midway leaves the cache serving what was committed before", async () => {
    const manager = managerWith(right);
    const { key } = await newKey(manager);
    await manager.createVersion(key.id, null);

    // The key row is written before the version rows, so each of these fails after a first write.
    let heal = injectWriteFailure(dir.path, "kms_versions", "INSERT");
    await failsCommittingNothing(() => manager.createVersion(key.id, null));
    expect(await outcomeOf(() => manager.encrypt(key.id, 3, Buffer.from("x"), NO_AAD))).toBe("CRYPTO_KEY_VERSION_NOT_FOUND");
    await failsCommittingNothing(() => manager.transition(key.id, 2, "disable"));
    await manager.encrypt(key.id, 2, Buffer.from("x"), NO_AAD);
    await failsCommittingNothing(() => newKey(manager));
    expect(await manager.listKeys("ns", { limit: 10, offset: 0 })).toHaveLength(1);
    heal();

    // Destroying the key would take every version out of the cache; failing, it must take none.
    heal = injectWriteFailure(dir.path, "kms_keys", "UPDATE");
    await failsCommittingNothing(() => manager.destroyKey(key.id));
    await manager.encrypt(key.id, 1, Buffer.from("x"), NO_AAD);
    await manager.encrypt(key.id, 2, Buffer.from("x"), NO_AAD);
    heal();

    expect((await manager.createVersion(key.id, null)).id).toBe(3);
  });

  it("that a rule refuses inside the transaction leaves the cache as it was", async () => {
    const manager = managerWith(right);
    const { key } = await newKey(manager);
    await manager.createVersion(key.id, null);
    await manager.transition(key.id, 2, "disable");
    const taken = await manager.createKey({ parentId: "ns", name: "taken", description: "", labels: [], rotationPeriodMs: null, defaultAlgorithm: "AES_256", owner: "a" });

    // The cache entry of the outcome is built before the store finds the name taken.
    expect(await failsCommittingNothing(() => manager.updateKey(key.id, { name: "taken" }))).toBe("CRYPTO_KEY_NAME_TAKEN");
    expect(await failsCommittingNothing(() => manager.setPrimary(key.id, 2))).toBe("CRYPTO_KEY_VERSION_NOT_ENABLED");
    expect(await failsCommittingNothing(() => manager.transition(key.id, 1, "disable"))).toBe("CRYPTO_KEY_VERSION_IS_PRIMARY");
    expect(await failsCommittingNothing(() => manager.transition(key.id, 2, "restore"))).toBe("CRYPTO_KEY_VERSION_STATE_TRANSITION");
    expect(await outcomeOf(() => manager.encrypt(key.id, 2, Buffer.from("x"), NO_AAD))).toBe("CRYPTO_KEY_VERSION_NOT_ENABLED");
    expect((await manager.getKey(taken.key.id)).key.name).toBe("taken");
  });
});
