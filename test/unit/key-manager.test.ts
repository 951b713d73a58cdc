import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DomainError } from "../../src/errors/domain-error.js";
import { KeyCache } from "../../src/kms/key-cache.js";
import { KeyManager, newKeyId } from "../../src/kms/key-manager.js";
import { MasterKey } from "../../src/kms/master-key.js";
import { LAST_TIMESTAMP_MS } from "../../src/kms/model.js";
import { openDatabase } from "../../src/storage/sqlite/database.js";
import { SqliteKmsStore } from "../../src/storage/sqlite/sqlite-kms-store.js";
import { FakeClock } from "../support/fake-clock.js";
import { tempDir } from "../support/temp-dir.js";

const DAY = 24 * 3600 * 1000;
const GRACE = 7 * DAY;

function reason(fn: () => unknown): Promise<string> {
  return Promise.resolve()
    .then(fn)
    .then(
      () => "no error",
      (e: unknown) => (e instanceof DomainError ? e.detail.reason : `unexpected ${String(e)}`),
    );
}

describe("KeyManager on the SQLite store", () => {
  let dir: ReturnType<typeof tempDir>;
  let store: SqliteKmsStore;
  let clock: FakeClock;
  let manager: KeyManager;

  const newKey = (name = "", parentId = "ns") =>
    manager.createKey({ parentId, name, description: "", labels: [], rotationPeriodMs: null, defaultAlgorithm: "AES_256", owner: "alice" });

  beforeEach(() => {
    dir = tempDir();
    store = new SqliteKmsStore(openDatabase(dir.path, "upgrade"));
    clock = new FakeClock();
    const master = new MasterKey(randomBytes(32));
    manager = new KeyManager(store, new KeyCache(master, 1000), master, clock, { destroyGraceMs: GRACE });
  });

  afterEach(async () => {
    await store.close();
    dir.remove();
  });

  it("creates a key with version 1 ENABLED and primary, and stores only wrapped material", async () => {
    const view = await newKey("payments");
    expect(view.primary?.id).toBe(1);
    expect(view.primary?.state).toBe("ENABLED");
    const stored = await store.getKey(view.key.id);
    expect(stored?.versions[0]?.wrappedMaterial?.length).toBe(12 + 32 + 16);
  });

  it("gives keys ids of 20 base32 characters that sort by creation time, and never the same id twice", async () => {
    const first = await newKey();
    clock.advance(1);
    const second = await newKey();
    for (const id of [first.key.id, second.key.id]) expect(id).toMatch(/^[a-z2-7]{20}$/);
    expect(first.key.id < second.key.id).toBe(true);
    // Within one millisecond, 55 random bits tell them apart.
    const sameMs = new Set(Array.from({ length: 10_000 }, () => newKeyId(clock.now())));
    expect(sameMs.size).toBe(10_000);
    // Ordered by time as strings, in ASCII order, across a change of every time character.
    const times = [0, 1, 31, 32, 1_764_000_000_000, 1_764_000_000_001, 32 ** 9 - 1];
    const ids = times.map((t) => newKeyId(t).slice(0, 9));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(times.length);
  });

  it("keeps names unique among live keys of a namespace, and frees them once the key is gone", async () => {
    const first = await newKey("dup");
    expect(await reason(() => newKey("dup"))).toBe("CRYPTO_KEY_NAME_TAKEN");
    await newKey("dup", "other-namespace");
    await manager.destroyKey(first.key.id);
    expect(await reason(() => newKey("dup"))).toBe("CRYPTO_KEY_NAME_TAKEN");
    clock.advance(GRACE);
    expect(await reason(() => manager.getKey(first.key.id))).toBe("CRYPTO_KEY_NOT_FOUND");
    expect((await newKey("dup")).key.name).toBe("dup");
  });

  // A probe of the clock (2026-11-28): the key was gone by comparing its goneAt (the sweep's time) with the clock, so a
  // step back of ten seconds brought it back, DESTROYED primary and all, beside the new key that took its name.
  it("a key whose every version was erased stays gone when the clock steps back", async () => {
    const first = await newKey("pay");
    await manager.createVersion(first.key.id, null);
    await manager.destroyKey(first.key.id);
    clock.advance(GRACE + 1000);
    expect(await manager.sweepDestroyed()).toBe(1);
    await newKey("pay");
    clock.advance(-GRACE);
    expect(await reason(() => manager.getKey(first.key.id))).toBe("CRYPTO_KEY_NOT_FOUND");
    expect((await manager.listKeys("ns", { limit: 10, offset: 0 })).map((v) => v.key.name)).toEqual(["pay"]);
    expect(await reason(() => newKey("pay"))).toBe("CRYPTO_KEY_NAME_TAKEN");
  });

  it("stops decrypting with a disabled version on the very next call", async () => {
    const { key } = await newKey();
    const v2 = await manager.createVersion(key.id, null);
    const sealed = await manager.encrypt(key.id, v2.id, Buffer.from("x"), new Uint8Array());
    await manager.transition(key.id, v2.id, "disable");
    expect(await reason(() => manager.decrypt(key.id, sealed, new Uint8Array()))).toBe("CRYPTO_KEY_VERSION_NOT_ENABLED");
    await manager.transition(key.id, v2.id, "enable");
    const opened = await manager.decrypt(key.id, sealed, new Uint8Array());
    expect(Buffer.from(opened.plaintext).toString()).toBe("x");
  });

  it("sweeps past destroyAt: the version becomes DESTROYED and its material is erased", async () => {
    const { key } = await newKey();
    const v2 = await manager.createVersion(key.id, "AES_128");
    const sealed = await manager.encrypt(key.id, 2, Buffer.from("secret"), new Uint8Array());
    const scheduled = await manager.transition(key.id, v2.id, "destroy");
    expect(scheduled.destroyAt).toBe(clock.now() + GRACE);
    clock.advance(GRACE);
    expect(await reason(() => manager.transition(key.id, 2, "restore"))).toBe("CRYPTO_KEY_VERSION_STATE_TRANSITION");
    expect(await manager.sweepDestroyed()).toBe(1);
    const stored = await store.getKey(key.id);
    expect(stored?.versions[1]).toMatchObject({ state: "DESTROYED", wrappedMaterial: null });
    expect(await reason(() => manager.decrypt(key.id, sealed, new Uint8Array()))).toBe("CRYPTO_KEY_VERSION_NOT_ENABLED");
    expect(await manager.sweepDestroyed()).toBe(0);
  });

  // A probe of the clock (2026-11-28): rotated at the end of the year 9999, a key got a next time past the Timestamp's
  // range, and the key and its namespace answered INTERNAL from then on.
  it("never schedules a rotation past google.protobuf.Timestamp's last millisecond", async () => {
    clock.advance(Date.parse("9999-12-31T23:59:30Z") - clock.now());
    const view = await manager.createKey({ parentId: "ns", name: "", description: "", labels: [], rotationPeriodMs: DAY, defaultAlgorithm: "AES_256", owner: "a" });
    expect(view.key.nextRotationAt).toBe(LAST_TIMESTAMP_MS);
    await manager.updateKey(view.key.id, { rotationPeriodMs: 2 * DAY });
    expect((await manager.getKey(view.key.id)).key.nextRotationAt).toBe(LAST_TIMESTAMP_MS);
    clock.advance(LAST_TIMESTAMP_MS - clock.now());
    expect(await manager.rotateDue()).toBe(1);
    const rotated = await manager.getKey(view.key.id);
    expect(rotated.primary?.id).toBe(2);
    expect(rotated.key.nextRotationAt).toBe(LAST_TIMESTAMP_MS);
  });

  it("rotates by the clock: a new primary version and the next time advanced by the period", async () => {
    const view = await manager.createKey({ parentId: "ns", name: "", description: "", labels: [], rotationPeriodMs: DAY, defaultAlgorithm: "AES_192", owner: "a" });
    expect(view.key.nextRotationAt).toBe(clock.now() + DAY);
    clock.advance(DAY - 1);
    expect(await manager.rotateDue()).toBe(0);
    clock.advance(1);
    expect(await manager.rotateDue()).toBe(1);
    const rotated = await manager.getKey(view.key.id);
    expect(rotated.primary).toMatchObject({ id: 2, algorithm: "AES_192", state: "ENABLED" });
    expect(rotated.key.nextRotationAt).toBe(view.key.createdAt + 2 * DAY);
    // Clearing the period stops rotation.
    await manager.updateKey(view.key.id, { rotationPeriodMs: null });
    clock.advance(10 * DAY);
    expect(await manager.rotateDue()).toBe(0);
  });

  it("destroys a whole key: every version scheduled, no encryption, and restore brings it back", async () => {
    const { key } = await newKey();
    await manager.createVersion(key.id, null);
    await manager.destroyKey(key.id);
    expect(await reason(() => manager.encrypt(key.id, 1, Buffer.from("x"), new Uint8Array()))).toBe("CRYPTO_KEY_VERSION_NOT_ENABLED");
    await manager.transition(key.id, 1, "restore");
    await manager.transition(key.id, 1, "enable");
    await manager.encrypt(key.id, 1, Buffer.from("x"), new Uint8Array());
    clock.advance(GRACE);
    await manager.sweepDestroyed();
    expect((await manager.getKey(key.id)).key.goneAt).toBeNull();
  });

  it("a key being destroyed does not rotate, even with an ENABLED version, until that version is made primary", async () => {
    const view = await manager.createKey({ parentId: "ns", name: "", description: "", labels: [], rotationPeriodMs: DAY, defaultAlgorithm: "AES_256", owner: "alice" });
    const id = view.key.id;
    await manager.createVersion(id, null);
    await manager.destroyKey(id);
    await manager.transition(id, 2, "restore");
    await manager.transition(id, 2, "enable");
    clock.advance(2 * DAY);
    await manager.rotateDue();
    expect((await manager.listVersions(id, { limit: 10, offset: 0 })).map((v) => v.id)).toEqual([1, 2]);
    // Its schedule moved on, so that it is not due again at every run of the sweeper.
    expect((await manager.getKey(id)).key.nextRotationAt).toBe(clock.now() + DAY);
    expect(await manager.rotateDue()).toBe(0);
    expect(await reason(() => manager.encrypt(id, 2, Buffer.from("x"), new Uint8Array()))).toBe("CRYPTO_KEY_DESTRUCTION_SCHEDULED");

    await manager.setPrimary(id, 2);
    await manager.encrypt(id, 2, Buffer.from("x"), new Uint8Array());
    clock.advance(DAY);
    expect(await manager.rotateDue()).toBe(1);
    expect((await manager.getKey(id)).primary?.id).toBe(3);
  });

  it("moves the schedule of a key whose every version is scheduled for destruction, and rotates it a period after", async () => {
    const view = await manager.createKey({ parentId: "ns", name: "", description: "", labels: [], rotationPeriodMs: DAY, defaultAlgorithm: "AES_256", owner: "alice" });
    const id = view.key.id;
    await manager.destroyKey(id);
    clock.advance(DAY + 1000);
    expect(await manager.rotateDue()).toBe(1);
    // Not in the past while the key waits for destruction (a period on, as the schedule goes), and no version made.
    const next = (await manager.getKey(id)).key.nextRotationAt;
    expect(next).toBe(view.key.nextRotationAt! + DAY);
    expect(next).toBeGreaterThan(clock.now());
    expect((await manager.listVersions(id, { limit: 10, offset: 0 })).map((v) => v.id)).toEqual([1]);
    expect(await manager.rotateDue()).toBe(0);
    await manager.transition(id, 1, "restore");
    await manager.transition(id, 1, "enable");
    expect(await manager.rotateDue()).toBe(0);
    expect((await manager.getKey(id)).primary?.id).toBe(1);
    clock.advance(DAY);
    expect(await manager.rotateDue()).toBe(1);
    expect((await manager.getKey(id)).primary?.id).toBe(2);
  });

  it("never leaves a rotation period without a next rotation time", async () => {
    const view = await manager.createKey({ parentId: "ns", name: "", description: "", labels: [], rotationPeriodMs: DAY, defaultAlgorithm: "AES_256", owner: "alice" });
    const id = view.key.id;
    expect(await reason(() => manager.updateKey(id, { nextRotationAt: null }))).toBe("REQUEST_INVALID");
    expect((await manager.getKey(id)).key.nextRotationAt).toBe(view.key.createdAt + DAY);
    // A period and an empty next time under one mask: the next time starts from now.
    clock.advance(1000);
    const updated = await manager.updateKey(id, { rotationPeriodMs: 2 * DAY, nextRotationAt: null });
    expect(updated.key.nextRotationAt).toBe(clock.now() + 2 * DAY);
    // Clearing both stops rotation.
    expect((await manager.updateKey(id, { rotationPeriodMs: null, nextRotationAt: null })).key.nextRotationAt).toBeNull();
  });

  it("pages keys by creation time and versions by id", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push((await newKey(`k${i}`)).key.id);
      clock.advance(1);
    }
    const page = await manager.listKeys("ns", { limit: 2, offset: 1 });
    expect(page.map((k) => k.key.id)).toEqual(ids.slice(1, 3));
    for (let i = 0; i < 3; i++) await manager.createVersion(ids[0]!, null);
    const versions = await manager.listVersions(ids[0]!, { limit: 2, offset: 2 });
    expect(versions.map((v) => v.id)).toEqual([3, 4]);
  });
});
