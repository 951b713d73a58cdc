import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DomainError } from "../../src/errors/domain-error.js";
import { create } from "@bufbuild/protobuf";
import { CryptoKeyVersion_State, GetCryptoKeyRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import type { CryptoKey } from "../../gen/kms/v1/kms_pb.js";
import { createCryptoHandlers } from "../../src/kms/crypto-handlers.js";
import { KeyCache } from "../../src/kms/key-cache.js";
import { createKmsService } from "../../src/kms/kms-service.js";
import type { Call } from "../../src/pipeline/call.js";
import { KeyManager } from "../../src/kms/key-manager.js";
import { rewrapMasterKey } from "../../src/kms/master-key-rewrap.js";
import { MasterKey } from "../../src/kms/master-key.js";
import type { KeyAggregate, KeyState, VersionSelection } from "../../src/kms/model.js";
import type { KeyMutation } from "../../src/storage/kms-store.js";
import { openDatabase } from "../../src/storage/sqlite/database.js";
import { SqliteKmsStore } from "../../src/storage/sqlite/sqlite-kms-store.js";
import { FakeClock } from "../support/fake-clock.js";
import { tempDir } from "../support/temp-dir.js";

// Key reads (GetCryptoKey, GetCryptoKeyVersion, ListCryptoKeyVersions) answer from the KeyCache. After every kind
// of mutation this process makes, a read must see exactly what a new process reading the store would see, and
// must not touch the store.

const DAY = 24 * 3600 * 1000;
const GRACE = 7 * DAY;
const NO_AAD = new Uint8Array();
const ALL = { limit: 1000, offset: 0 };

// Counts key reads, and can hold one back after it has read, as a slower store would.
class CountingStore extends SqliteKmsStore {
  reads = 0;
  hold: Promise<void> | null = null;

  override async getKey(keyId: string): Promise<KeyAggregate | null> {
    this.reads++;
    const aggregate = await super.getKey(keyId);
    if (this.hold !== null) await this.hold;
    return aggregate;
  }
}

function reason(fn: () => unknown): Promise<string> {
  return Promise.resolve()
    .then(fn)
    .then(
      () => "no error",
      (e: unknown) => (e instanceof DomainError ? e.detail.reason : "fault"),
    );
}

describe("KeyCache: key reads after each mutation", () => {
  let dir: ReturnType<typeof tempDir>;
  let store: CountingStore;
  let clock: FakeClock;
  let master: MasterKey;
  let manager: KeyManager;

  const managerWith = (key: MasterKey) => new KeyManager(store, new KeyCache(key, 1000), key, clock, { destroyGraceMs: GRACE });

  // Everything the reads answer about a key, taken synchronously: a promise here would mean a trip to the store.
  function cachedReads(m: KeyManager, keyId: string) {
    const view = m.getKey(keyId);
    const versions = m.listVersions(keyId, ALL);
    if (view instanceof Promise || versions instanceof Promise) throw new Error("answered from the store, not from the cache");
    const each = versions.map((v) => {
      const version = m.getVersion(keyId, v.id);
      if (version instanceof Promise) throw new Error("answered from the store, not from the cache");
      return version;
    });
    return { view, versions, each };
  }

  // The same reads by a manager with an empty cache, as a process started now would answer them from the store.
  async function storedReads(keyId: string) {
    const fresh = managerWith(master);
    const versions = await fresh.listVersions(keyId, ALL);
    return { view: await fresh.getKey(keyId), versions, each: await Promise.all(versions.map((v) => fresh.getVersion(keyId, v.id))) };
  }

  // Reads after a mutation: from memory, and the same as from the store.
  async function readsAfter(keyId: string) {
    const before = store.reads;
    const reads = cachedReads(manager, keyId);
    expect(store.reads).toBe(before);
    expect(reads).toEqual(await storedReads(keyId));
    return reads;
  }

  const newKey = (rotationPeriodMs: number | null = null) =>
    manager.createKey({ parentId: "ns", name: "k", description: "d", labels: ["a=1"], rotationPeriodMs, defaultAlgorithm: "AES_256", owner: "alice" });

  beforeEach(() => {
    dir = tempDir();
    store = new CountingStore(openDatabase(dir.path, "upgrade"));
    clock = new FakeClock();
    master = new MasterKey(randomBytes(32));
    manager = managerWith(master);
  });

  afterEach(async () => {
    await store.close();
    dir.remove();
  });

  it("after creation", async () => {
    const created = await newKey();
    const { view, versions } = await readsAfter(created.key.id);
    expect(view).toEqual(created);
    expect(view.primary).not.toHaveProperty("wrappedMaterial");
    expect(versions.map((v) => [v.id, v.state])).toEqual([[1, "ENABLED"]]);
  });

  it("after an update of each field", async () => {
    const { key } = await newKey();
    await manager.updateKey(key.id, { name: "renamed", description: "new", labels: ["b=2"] });
    expect((await readsAfter(key.id)).view.key).toMatchObject({ name: "renamed", description: "new", labels: ["b=2"] });
    await manager.updateKey(key.id, { rotationPeriodMs: DAY, defaultAlgorithm: "AES_128" });
    expect((await readsAfter(key.id)).view.key).toMatchObject({ rotationPeriodMs: DAY, nextRotationAt: clock.now() + DAY, defaultAlgorithm: "AES_128" });
    await manager.updateKey(key.id, { rotationPeriodMs: null });
    expect((await readsAfter(key.id)).view.key).toMatchObject({ rotationPeriodMs: null, nextRotationAt: null });
  });

  it("after a new version, each state change and a primary change", async () => {
    const { key } = await newKey();
    await manager.createVersion(key.id, "AES_192");
    expect((await readsAfter(key.id)).versions.map((v) => [v.id, v.algorithm, v.state])).toEqual([
      [1, "AES_256", "ENABLED"],
      [2, "AES_192", "ENABLED"],
    ]);
    await manager.setPrimary(key.id, 2);
    expect((await readsAfter(key.id)).view.primary?.id).toBe(2);
    await manager.transition(key.id, 1, "disable");
    expect((await readsAfter(key.id)).each[0]?.state).toBe("DISABLED");
    await manager.transition(key.id, 1, "enable");
    expect((await readsAfter(key.id)).each[0]?.state).toBe("ENABLED");
    await manager.transition(key.id, 1, "destroy");
    expect((await readsAfter(key.id)).each[0]).toMatchObject({ state: "DESTROYED_SCHEDULED", destroyAt: clock.now() + GRACE });
    await manager.transition(key.id, 1, "restore");
    expect((await readsAfter(key.id)).each[0]).toMatchObject({ state: "DISABLED", destroyAt: null });
  });

  it("after the key is destroyed, restored, and gone", async () => {
    const { key } = await newKey();
    await manager.destroyKey(key.id);
    expect((await readsAfter(key.id)).view.primary?.state).toBe("DESTROYED_SCHEDULED");
    await manager.transition(key.id, 1, "restore");
    expect((await readsAfter(key.id)).view.key.goneAt).toBeNull();
    await manager.destroyKey(key.id);
    clock.advance(GRACE);
    // Gone by the clock, before the sweeper has run: not found from the cache and from the store alike.
    expect(await reason(() => manager.getKey(key.id))).toBe("CRYPTO_KEY_NOT_FOUND");
    expect(await reason(() => manager.listVersions(key.id, ALL))).toBe("CRYPTO_KEY_NOT_FOUND");
    expect(await reason(() => managerWith(master).getKey(key.id))).toBe("CRYPTO_KEY_NOT_FOUND");
  });

  it("after the sweeper destroys a version and rotates a key", async () => {
    const { key } = await newKey(DAY);
    await manager.createVersion(key.id, null);
    await manager.transition(key.id, 2, "destroy");
    clock.advance(GRACE);
    expect(await manager.sweepDestroyed()).toBe(1);
    expect((await readsAfter(key.id)).each[1]).toMatchObject({ state: "DESTROYED" });
    expect(await manager.rotateDue()).toBe(1);
    const { view, versions } = await readsAfter(key.id);
    expect(view.primary?.id).toBe(3);
    expect(versions.map((v) => v.id)).toEqual([1, 2, 3]);
  });

  // A change to a key of 2,000 versions unwrapped all of them again: 18 ms a change, 7 once the cached entry's
  // material was copied instead (docs/performance.md).
  it("unwraps only the versions a change brings: the cached entry's material is copied, and serves as before", async () => {
    class CountingMasterKey extends MasterKey {
      unwraps = 0;
      override unwrap(wrapped: Uint8Array, keyId: string, versionId: number): Uint8Array {
        this.unwraps++;
        return super.unwrap(wrapped, keyId, versionId);
      }
    }
    const counting = new CountingMasterKey(randomBytes(32));
    master = counting;
    manager = managerWith(counting);
    const { key } = await newKey();
    for (let i = 0; i < 20; i++) await manager.createVersion(key.id, i % 2 === 0 ? "AES_128" : "AES_192");
    const sealed = await Promise.all(Array.from({ length: 21 }, (_, i) => manager.encrypt(key.id, i + 1, Buffer.from(`v${i + 1}`), NO_AAD)));
    // Each new version once, when it was made (the check that the master key opens it); the others were copied.
    expect(counting.unwraps).toBe(21);
    await manager.updateKey(key.id, { description: "changed" });
    await manager.setPrimary(key.id, 7);
    await manager.transition(key.id, 3, "disable");
    expect(counting.unwraps).toBe(21);
    // A version that serves again is unwrapped again: its material left the cache when it stopped serving.
    await manager.transition(key.id, 3, "enable");
    expect(counting.unwraps).toBe(22);
    await readsAfter(key.id);
    // Every version still opens what it sealed, and seals what a manager reading the store opens.
    for (let i = 0; i < 21; i++) {
      expect(Buffer.from((await manager.decrypt(key.id, sealed[i]!, NO_AAD)).plaintext).toString()).toBe(`v${i + 1}`);
      const again = await manager.encrypt(key.id, i + 1, Buffer.from("again"), NO_AAD);
      expect(Buffer.from((await managerWith(counting).decrypt(key.id, again, NO_AAD)).plaintext).toString()).toBe("again");
    }
    // A disabled version's material is not copied into the new entry: it offers no key.
    await manager.transition(key.id, 5, "disable");
    expect(await reason(() => manager.encrypt(key.id, 5, Buffer.from("x"), NO_AAD))).toBe("CRYPTO_KEY_VERSION_NOT_ENABLED");
  });

  it("after the master key is re-wrapped: the cache holds no wrapped material, so nothing in it changes", async () => {
    const { key } = await newKey();
    const sealed = await manager.encrypt(key.id, 1, Buffer.from("x"), NO_AAD);
    const next = randomBytes(32);
    await rewrapMasterKey({ store, dataDir: dir.path, current: { key: master, origin: "MASTER_KEY", ownFile: null }, next, nextOrigin: "next", now: clock.now(), report: () => {} });
    const before = cachedReads(manager, key.id);
    master = new MasterKey(next);
    expect(await storedReads(key.id)).toEqual(before);
    expect(Buffer.from((await managerWith(master).decrypt(key.id, sealed, NO_AAD)).plaintext).toString()).toBe("x");
    expect(Buffer.from((await manager.decrypt(key.id, sealed, NO_AAD)).plaintext).toString()).toBe("x");
  });

  // Counted by keys alone, 100,000 keys with the most text a caller may give them took 2.2 GB (a probe, 2026-11-28).
  it("counts a key with much text or many versions for what it holds", async () => {
    const cache = new KeyCache(master, 12);
    const small = new KeyManager(store, cache, master, clock, { destroyGraceMs: GRACE });
    const create = async (name: string, description: string, labels: string[] = []) =>
      (await small.createKey({ parentId: "ns", name, description, labels, rotationPeriodMs: null, defaultAlgorithm: "AES_128", owner: "alice" })).key.id;
    const cached = (ids: string[]) => ids.map((id) => cache.get(id) !== undefined);
    // Five units each: one, and four for 4,096 characters of description, or of 32 labels of 128.
    const heavy = [await create("h0", "d".repeat(4096)), await create("h1", "", Array.from({ length: 32 }, (_, i) => `${String(i).padStart(2, "0")}${"l".repeat(126)}`))];
    const light = [await create("k0", ""), await create("k1", ""), await create("k2", "")];
    // 5 + 5 + 3 > 12: the oldest heavy key went first.
    expect(cached([...heavy, ...light])).toEqual([false, true, true, true, true]);
    // A key of 63 versions (64 characters a version) weighs four units, of 64 five: 8 + 5 > 12, and the other heavy key goes.
    const versioned = await create("v", "");
    for (let i = 0; i < 62; i++) await small.createVersion(versioned, null);
    expect(cached([...heavy, ...light, versioned])).toEqual([false, true, true, true, true, true]);
    await small.createVersion(versioned, null);
    expect(cached([...heavy, ...light, versioned])).toEqual([false, false, true, true, true, true]);
  });

  it("answers from memory once loaded, and shares frozen records", async () => {
    const { key } = await newKey();
    const restarted = managerWith(master);
    await restarted.getKey(key.id);
    const reads = store.reads;
    const { view, versions } = cachedReads(restarted, key.id);
    expect(store.reads).toBe(reads);
    expect(Object.isFrozen(view.key) && Object.isFrozen(view.key.labels) && Object.isFrozen(versions[0])).toBe(true);
  });

  it("stays bounded by its setting: the least recently installed key goes first and is read again from the store", async () => {
    const cache = new KeyCache(master, 3);
    const small = new KeyManager(store, cache, master, clock, { destroyGraceMs: GRACE });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push((await small.createKey({ parentId: "ns", name: `k${i}`, description: "", labels: [], rotationPeriodMs: null, defaultAlgorithm: "AES_128", owner: "alice" })).key.id);
    }
    expect(ids.map((id) => cache.get(id) !== undefined)).toEqual([false, false, true, true, true]);
    // An evicted key still works: one read of the store brings it back, and pushes out the oldest of the others.
    const before = store.reads;
    const sealed = await small.encrypt(ids[0]!, 1, Buffer.from("evicted"), NO_AAD);
    expect(store.reads).toBe(before + 1);
    expect(ids.map((id) => cache.get(id) !== undefined)).toEqual([true, false, false, true, true]);
    const opened = small.decrypt(ids[0]!, sealed, NO_AAD);
    expect(opened).not.toBeInstanceOf(Promise);
    expect(Buffer.from((opened as { plaintext: Uint8Array }).plaintext).toString()).toBe("evicted");
  });

  it("does not install what a read loaded before a mutation committed", async () => {
    const { key } = await newKey();
    const restarted = managerWith(master);
    let release = (): void => {};
    store.hold = new Promise((resolve) => (release = resolve));
    // Reads the key as it is now, and is held back before installing it.
    const loading = restarted.getKey(key.id);
    store.hold = null;
    await restarted.updateKey(key.id, { description: "after" });
    release();
    expect((await loading).key.description).toBe("d");
    expect(cachedReads(restarted, key.id).view.key.description).toBe("after");
  });

  it("describes a key whose material does not unwrap, without caching it", async () => {
    const { key } = await newKey();
    const misconfigured = managerWith(new MasterKey(randomBytes(32)));
    expect((await misconfigured.getKey(key.id)).key.name).toBe("k");
    // The access check's read too, which ran before every GetCryptoKey and answered it 500.
    expect(await misconfigured.namespaceOf(key.id)).toBe(key.parentId);
    expect(await reason(() => misconfigured.encrypt(key.id, 1, Buffer.from("x"), NO_AAD))).toBe("fault");
    expect(misconfigured.getKey(key.id)).toBeInstanceOf(Promise);
  });

  it("GetCryptoKey shares one frozen message per key state, and a new one once the primary's destruction is due", async () => {
    const service = createKmsService(manager, createCryptoHandlers(manager), clock, { minRotationMs: DAY });
    const get = (keyId: string) => service.getCryptoKey(create(GetCryptoKeyRequestSchema, { keyId }), null as unknown as Call) as CryptoKey;
    const { key } = await newKey();
    const first = get(key.id);
    expect(first).not.toBeInstanceOf(Promise);
    expect(get(key.id)).toBe(first);
    expect(Object.isFrozen(first) && Object.isFrozen(first.primary) && Object.isFrozen(first.createdAt)).toBe(true);
    await manager.updateKey(key.id, { description: "changed" });
    expect(get(key.id)).not.toBe(first);
    expect(get(key.id).description).toBe("changed");

    // The primary scheduled for destruction before the other version, so that the key outlives it.
    await manager.createVersion(key.id, null);
    await manager.destroyKey(key.id);
    clock.advance(1);
    await manager.transition(key.id, 2, "restore");
    await manager.transition(key.id, 2, "destroy");
    const scheduled = get(key.id);
    expect(scheduled.primary?.state).toBe(CryptoKeyVersion_State.DESTROYED_SCHEDULED);
    clock.advance(GRACE - 2);
    expect(get(key.id)).toBe(scheduled);
    clock.advance(1);
    expect(get(key.id).primary?.state).toBe(CryptoKeyVersion_State.DESTROYED);
  });

  // A change of one version is patched into the cached entry (KeyCache.apply); where a patch could not be right, the
  // entry goes and is read whole when next needed.
  it("patches the cached entry, or drops it when the key serves again or the entry missed another server's change", async () => {
    const sealed = async (m: KeyManager, keyId: string, versionId: number) => m.encrypt(keyId, versionId, Buffer.from(`v${versionId}`), NO_AAD);
    const opens = async (m: KeyManager, keyId: string, ciphertext: Uint8Array) => Buffer.from((await m.decrypt(keyId, ciphertext, NO_AAD)).plaintext).toString();
    const cache = new KeyCache(master, 1000);
    manager = new KeyManager(store, cache, master, clock, { destroyGraceMs: GRACE });
    const { key } = await newKey();
    await manager.createVersion(key.id, null);
    await manager.setPrimary(key.id, 2);
    const first = await sealed(manager, key.id, 1);
    // Patched: answered from memory, as the store would answer.
    await readsAfter(key.id);

    // Serving again after DestroyCryptoKey: version 1 restored, enabled and made primary. Version 1 serves, and so
    // would version 2 once enabled again: the entry, which held no material, is dropped and read again whole.
    await manager.destroyKey(key.id);
    await manager.transition(key.id, 1, "restore");
    await manager.transition(key.id, 1, "enable");
    expect(await reason(() => sealed(manager, key.id, 1))).toBe("CRYPTO_KEY_DESTRUCTION_SCHEDULED");
    await readsAfter(key.id);
    await manager.setPrimary(key.id, 1);
    expect(manager.getKey(key.id)).toBeInstanceOf(Promise);
    expect(await opens(manager, key.id, first)).toBe("v1");
    await readsAfter(key.id);

    // Not cached: nothing is installed, and the next read loads the key whole.
    cache.evict(key.id);
    await manager.transition(key.id, 2, "restore");
    const loading = manager.getKey(key.id);
    expect(loading).toBeInstanceOf(Promise);
    await loading;
    await readsAfter(key.id);

    // Another server made version 3 and this one has not been told: its entry is not patched but dropped.
    const other = managerWith(master);
    await other.createVersion(key.id, null);
    await manager.transition(key.id, 2, "enable");
    expect(manager.getKey(key.id)).toBeInstanceOf(Promise);
    const third = await sealed(other, key.id, 3);
    expect(await opens(manager, key.id, third)).toBe("v3");
    await readsAfter(key.id);
  });

  // On PostgreSQL two commits of one key can return out of order: the older state, installed last, outlived the notices
  // that were to evict it, and a disabled version went on serving for minutes (a probe, 2026-11-28).
  it("on a store whose commits can return out of order, evicts what a mutation changed instead of installing it", async () => {
    class OutOfOrder extends SqliteKmsStore {
      override readonly commitsInOrder = false;
      held: Promise<void> | null = null;
      override async mutateKey<T>(keyId: string, now: number, decide: (current: KeyState) => KeyMutation<T>, selection?: VersionSelection) {
        const hold = this.held;
        const outcome = await super.mutateKey(keyId, now, decide, selection);
        if (hold !== null) await hold;
        return outcome;
      }
    }
    const shared = new OutOfOrder(openDatabase(dir.path, "upgrade"));
    const cache = new KeyCache(master, 1000);
    const here = new KeyManager(shared, cache, master, clock, { destroyGraceMs: GRACE });
    const { key } = await here.createKey({ parentId: "ns", name: "race", description: "", labels: [], rotationPeriodMs: null, defaultAlgorithm: "AES_256", owner: "alice" });
    await here.createVersion(key.id, null);
    await here.transition(key.id, 2, "disable");
    // Enable is committed first but returns last; the disable after it returns at once.
    let release!: () => void;
    shared.held = new Promise((resolve) => (release = resolve));
    const enabling = here.transition(key.id, 2, "enable");
    await new Promise((resolve) => setImmediate(resolve));
    shared.held = null;
    await here.transition(key.id, 2, "disable");
    release();
    await enabling;
    expect(await reason(() => here.encrypt(key.id, 2, Buffer.from("x"), NO_AAD))).toBe("CRYPTO_KEY_VERSION_NOT_ENABLED");
    // Read from the store by that call, and cached as the store has it.
    expect(cache.get(key.id)?.version(2)?.state).toBe("DISABLED");
    await shared.close();
  });

  it("follows another server's changes: an evicted entry is read again, a load an eviction overtook is not kept, a distrusted cache keeps nothing", async () => {
    const cache = new KeyCache(master, 1000);
    const here = new KeyManager(store, cache, master, clock, { destroyGraceMs: GRACE });
    const { key } = await newKey();
    await here.encrypt(key.id, 1, Buffer.from("x"), NO_AAD);
    // Another server (here: `manager`, with a cache of its own) makes version 2 primary and disables version 1.
    await manager.createVersion(key.id, null);
    await manager.setPrimary(key.id, 2);
    await manager.transition(key.id, 1, "disable");
    // Until told, this server's entry answers.
    expect(await reason(() => here.encrypt(key.id, 1, Buffer.from("x"), NO_AAD))).toBe("no error");
    cache.evict(key.id);
    const reads = store.reads;
    expect(await reason(() => here.encrypt(key.id, 1, Buffer.from("x"), NO_AAD))).toBe("CRYPTO_KEY_VERSION_NOT_ENABLED");
    expect(store.reads).toBe(reads + 1);

    // A load that started before an eviction is not installed: the change it may have missed is read next time.
    cache.evict(key.id);
    let release!: () => void;
    store.hold = new Promise((resolve) => (release = resolve));
    const loading = here.getKey(key.id);
    cache.evict(key.id);
    release();
    await loading;
    store.hold = null;
    expect(here.getKey(key.id)).toBeInstanceOf(Promise);
    await here.getKey(key.id);
    expect(here.getKey(key.id)).not.toBeInstanceOf(Promise);

    // While the feed cannot vouch for the cache, nothing is served from it or kept in it.
    cache.trust(false);
    expect(here.getKey(key.id)).toBeInstanceOf(Promise);
    await here.getKey(key.id);
    expect(here.getKey(key.id)).toBeInstanceOf(Promise);
    await here.encrypt(key.id, 2, Buffer.from("x"), NO_AAD);
    expect(here.sealingKey(key.id, 2)).toBeInstanceOf(Promise);
    cache.trust(true);
    await here.getKey(key.id);
    expect(here.getKey(key.id)).not.toBeInstanceOf(Promise);
  });
});
