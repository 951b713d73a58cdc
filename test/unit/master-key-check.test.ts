import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { KeyCache } from "../../src/kms/key-cache.js";
import { KeyManager } from "../../src/kms/key-manager.js";
import {
  CHECK_SCHEME,
  MasterKeyMismatchError,
  judgeMasterKey,
  masterKeyCheck,
  requireMatchingMasterKey,
} from "../../src/kms/master-key-check.js";
import { rewrapMasterKey } from "../../src/kms/master-key-rewrap.js";
import type { RewrapStep } from "../../src/kms/master-key-rewrap.js";
import { MasterKeyMissingError, loadMasterKey, masterKeyFileText, resolveMasterKey } from "../../src/kms/master-key-source.js";
import { MasterKey } from "../../src/kms/master-key.js";
import { openDatabase } from "../../src/storage/sqlite/database.js";
import { SqliteKmsStore } from "../../src/storage/sqlite/sqlite-kms-store.js";
import { FakeClock } from "../support/fake-clock.js";
import { storeSnapshot } from "../support/store-snapshot.js";
import { tempDir } from "../support/temp-dir.js";

// The check value of the master key and the start-up rules built on it (docs/master-key-check.md), on a real SQLite
// store in a temporary data directory. The same rules are exercised through real server processes in
// test/e2e/master-key-startup.test.ts and test/e2e/master-key-rewrap.test.ts.

const material = () => randomBytes(32);

describe("master key check value", () => {
  let dir: ReturnType<typeof tempDir>;
  let db: Database.Database;
  let store: SqliteKmsStore;
  let notices: string[];
  const notify = { info: (_f: object, m: string) => notices.push(m), warn: (_f: object, m: string) => notices.push(m) };
  const keyFile = () => join(dir.path, "master.key");
  const stagedFile = () => join(dir.path, "master.key.new");
  const ownLayout = () => ({ masterKey: "", masterKeyFile: "", dataDir: dir.path });

  // Keys made the way the server makes them; nothing of this path records a check value (only start-up does), so
  // the store is like one written before check values existed.
  async function writeKeys(master: MasterKey, count: number): Promise<void> {
    const manager = new KeyManager(store, new KeyCache(master, 100), master, new FakeClock(), { destroyGraceMs: 0 });
    for (let i = 0; i < count; i++) {
      const key = await manager.createKey({ parentId: "ns", name: "", description: "", labels: [], rotationPeriodMs: null, defaultAlgorithm: "AES_128", owner: "a" });
      await manager.createVersion(key.key.id, "AES_256");
    }
  }

  const wrappedRows = () =>
    db.prepare("SELECT key_id, id, wrapped_material FROM kms_versions ORDER BY key_id, id").all() as {
      key_id: string;
      id: number;
      wrapped_material: Buffer | null;
    }[];

  beforeEach(() => {
    dir = tempDir();
    db = openDatabase(dir.path, "upgrade");
    store = new SqliteKmsStore(db);
    notices = [];
  });

  afterEach(async () => {
    await store.close();
    dir.remove();
  });

  it("is a MAC of a constant: the same for one key, different for another, with a short key id", async () => {
    const bytes = material();
    const a = masterKeyCheck(new MasterKey(bytes));
    expect(masterKeyCheck(new MasterKey(Buffer.from(bytes)))).toEqual(a);
    expect(a.scheme).toBe(CHECK_SCHEME);
    expect(a.checkValue).toHaveLength(32);
    expect(Buffer.from(a.checkValue).equals(bytes)).toBe(false);
    expect(a.keyId).toMatch(/^[0-9a-f]{16}$/);
    expect(a.keyId).toBe(Buffer.from(a.checkValue).subarray(0, 8).toString("hex"));
    expect(masterKeyCheck(new MasterKey(material())).keyId).not.toBe(a.keyId);
  });

  it("is recorded on an empty store; then only that key is accepted, and a refusal changes nothing", async () => {
    const right = new MasterKey(material());
    const wrong = new MasterKey(material());
    expect(await judgeMasterKey(right, store)).toEqual({ kind: "nothing-to-check" });
    expect(await requireMatchingMasterKey(right, store, { origin: "MASTER_KEY", dataDir: "/d" }, 5)).toEqual({ kind: "nothing-to-check" });
    expect(await store.readMasterKeyCheck()).toEqual({ ...masterKeyCheck(right), checkValue: Buffer.from(masterKeyCheck(right).checkValue) });
    expect(await judgeMasterKey(right, store)).toEqual({ kind: "matches" });

    const before = storeSnapshot(dir.path);
    const refuse = () => requireMatchingMasterKey(wrong, store, { origin: "MASTER_KEY", dataDir: "/d" }, 6);
    await expect(refuse()).rejects.toThrow(MasterKeyMismatchError);
    await expect(refuse()).rejects.toThrow(
      `the master key from MASTER_KEY (key id ${masterKeyCheck(wrong).keyId}) does not match the one the data directory /d ` +
        `was written with (key id ${masterKeyCheck(right).keyId}, from the check value stored with the data); nothing was changed. ` +
        "Start with the original master key (MASTER_KEY, MASTER_KEY_FILE or <data-dir>/master.key), or, to move the data to " +
        "another master key, run `npm run rewrap-master-key` with the original one configured",
    );
    expect(storeSnapshot(dir.path)).toEqual(before);
  });

  it("on a store from before check values: recorded once the key unwraps a stored material, refused if it does not", async () => {
    const right = new MasterKey(material());
    const wrong = new MasterKey(material());
    await writeKeys(right, 2);
    expect(await store.readMasterKeyCheck()).toBeNull();

    const before = storeSnapshot(dir.path);
    const verdict = await judgeMasterKey(wrong, store);
    expect(verdict.kind).toBe("cannot-unwrap");
    await expect(requireMatchingMasterKey(wrong, store, { origin: "/k", dataDir: "/d" }, 1)).rejects.toThrow(
      /^the master key from \/k \(key id [0-9a-f]{16}\) cannot unwrap the stored material of key [a-z2-7]{20} version \d: the data directory \/d was written with another master key; nothing was changed/,
    );
    expect(storeSnapshot(dir.path)).toEqual(before);

    expect(await requireMatchingMasterKey(right, store, { origin: "/k", dataDir: "/d" }, 1)).toEqual({ kind: "unwraps" });
    expect((await store.readMasterKeyCheck())?.keyId).toBe(masterKeyCheck(right).keyId);
    expect(await judgeMasterKey(wrong, store)).toEqual({ kind: "mismatch", storedKeyId: masterKeyCheck(right).keyId });
  });

  it("refuses a check value of a scheme it does not know rather than guessing", async () => {
    await store.recordMasterKeyCheck({ scheme: "future-v9", keyId: "x", checkValue: Buffer.alloc(32) }, 1);
    await expect(judgeMasterKey(new MasterKey(material()), store)).rejects.toThrow('unknown scheme "future-v9"');
  });

  describe("the data directory's own master.key", () => {
    it("is generated (0600) for a store that never held a key, and its check value recorded", async () => {
      const key = await loadMasterKey(ownLayout(), store, notify);
      expect(statSync(keyFile()).mode & 0o777).toBe(0o600);
      expect(masterKeyCheck(key)).toEqual(masterKeyCheck(new MasterKey(Buffer.from(readFileSync(keyFile(), "utf8"), "base64"))));
      expect((await store.readMasterKeyCheck())?.keyId).toBe(masterKeyCheck(key).keyId);
      expect(notices).toEqual(["created a new master key; back it up: without it no stored key can be used"]);
    });

    it("is never generated for a store that holds keys, or that recorded a check value", async () => {
      await writeKeys(new MasterKey(material()), 1);
      await expect(loadMasterKey(ownLayout(), store, notify)).rejects.toThrow(MasterKeyMissingError);
      await expect(loadMasterKey(ownLayout(), store, notify)).rejects.toThrow(`the master key file ${keyFile()} is missing, but the data directory`);
      expect(existsSync(keyFile())).toBe(false);

      db.exec("DELETE FROM kms_versions; DELETE FROM kms_keys");
      await store.recordMasterKeyCheck(masterKeyCheck(new MasterKey(material())), 1);
      await expect(loadMasterKey(ownLayout(), store, notify)).rejects.toThrow(/key id [0-9a-f]{16}\); no new one was generated/);
      expect(existsSync(keyFile())).toBe(false);
    });

    it("is kept, and master.key.new discarded, when the data is still under master.key (re-wrap not committed)", async () => {
      const current = material();
      writeFileSync(keyFile(), masterKeyFileText(current), { mode: 0o600 });
      writeFileSync(stagedFile(), masterKeyFileText(material()), { mode: 0o600 });
      writeFileSync(`${stagedFile()}.tmp`, "half", { mode: 0o600 });
      await store.recordMasterKeyCheck(masterKeyCheck(new MasterKey(current)), 1);
      const key = await loadMasterKey(ownLayout(), store, notify);
      expect(masterKeyCheck(key).keyId).toBe(masterKeyCheck(new MasterKey(current)).keyId);
      expect([existsSync(stagedFile()), existsSync(`${stagedFile()}.tmp`)]).toEqual([false, false]);
      expect(readFileSync(keyFile(), "utf8")).toBe(masterKeyFileText(current));
      expect(notices[0]).toMatch(/had not committed/);
    });

    it("is replaced by master.key.new when the data is already under it (re-wrap committed, rename not done)", async () => {
      const next = material();
      writeFileSync(keyFile(), masterKeyFileText(material()), { mode: 0o600 });
      writeFileSync(stagedFile(), masterKeyFileText(next), { mode: 0o600 });
      await store.recordMasterKeyCheck(masterKeyCheck(new MasterKey(next)), 1);
      const key = await loadMasterKey(ownLayout(), store, notify);
      expect(masterKeyCheck(key).keyId).toBe(masterKeyCheck(new MasterKey(next)).keyId);
      expect(existsSync(stagedFile())).toBe(false);
      expect(readFileSync(keyFile(), "utf8")).toBe(masterKeyFileText(next));
      expect(notices[0]).toMatch(/finished an interrupted master key re-wrap/);
    });

    it("is left with master.key.new for the operator when neither matches, and start-up refuses", async () => {
      const [a, b] = [material(), material()];
      writeFileSync(keyFile(), masterKeyFileText(a), { mode: 0o600 });
      writeFileSync(stagedFile(), masterKeyFileText(b), { mode: 0o600 });
      await store.recordMasterKeyCheck(masterKeyCheck(new MasterKey(material())), 1);
      await expect(loadMasterKey(ownLayout(), store, notify)).rejects.toThrow(MasterKeyMismatchError);
      expect(readFileSync(keyFile(), "utf8")).toBe(masterKeyFileText(a));
      expect(readFileSync(stagedFile(), "utf8")).toBe(masterKeyFileText(b));
    });

    it("is not looked at when the key comes from MASTER_KEY", async () => {
      const chosen = material();
      writeFileSync(stagedFile(), masterKeyFileText(material()), { mode: 0o600 });
      const resolved = await resolveMasterKey({ masterKey: chosen.toString("base64"), masterKeyFile: "", dataDir: dir.path }, store, notify);
      expect(resolved.ownFile).toBeNull();
      expect(existsSync(stagedFile())).toBe(true);
      expect(existsSync(keyFile())).toBe(false);
    });
  });

  describe("re-wrapping", () => {
    const steps: RewrapStep[] = [];
    const plan = (current: Uint8Array, next: Uint8Array, own = true) => ({
      store,
      dataDir: dir.path,
      current: { key: new MasterKey(current), origin: own ? keyFile() : "MASTER_KEY", ownFile: own ? keyFile() : null },
      next,
      nextOrigin: "/new.key",
      now: 1,
      report: (line: string) => notices.push(line),
      onStep: (step: RewrapStep) => steps.push(step),
    });

    beforeEach(() => {
      steps.length = 0;
    });

    it("moves every material and the check value to the new key in one go, and puts the new key in place", async () => {
      const [old, next] = [material(), material()];
      writeFileSync(keyFile(), masterKeyFileText(old), { mode: 0o600 });
      await writeKeys(new MasterKey(old), 3);
      db.prepare("UPDATE kms_versions SET state = 'DESTROYED', wrapped_material = NULL WHERE id = 1 AND rowid = (SELECT min(rowid) FROM kms_versions)").run();
      const before = wrappedRows();

      const outcome = await rewrapMasterKey(plan(old, next));
      expect(outcome).toEqual({ rewrapped: 5, oldKeyId: masterKeyCheck(new MasterKey(old)).keyId, newKeyId: masterKeyCheck(new MasterKey(next)).keyId });
      expect(steps).toEqual(["verified", "new-key-staged", "rewrapping", "committed", "key-replaced"]);
      expect(readFileSync(keyFile(), "utf8")).toBe(masterKeyFileText(next));
      expect(existsSync(stagedFile())).toBe(false);
      expect(await judgeMasterKey(new MasterKey(next), store)).toEqual({ kind: "matches" });
      const after = wrappedRows();
      expect(after.map((r) => [r.key_id, r.id])).toEqual(before.map((r) => [r.key_id, r.id]));
      for (const [i, row] of after.entries()) {
        const was = before[i]!;
        if (was.wrapped_material === null) {
          expect(row.wrapped_material).toBeNull();
          continue;
        }
        const plain = new MasterKey(old).unwrap(was.wrapped_material, was.key_id, was.id);
        expect(new MasterKey(next).unwrap(row.wrapped_material!, row.key_id, row.id)).toEqual(plain);
        expect(() => new MasterKey(old).unwrap(row.wrapped_material!, row.key_id, row.id)).toThrow();
      }
    });

    it("with MASTER_KEY or MASTER_KEY_FILE, re-wraps the data and writes no key file", async () => {
      const [old, next] = [material(), material()];
      await writeKeys(new MasterKey(old), 1);
      await rewrapMasterKey(plan(old, next, false));
      expect(steps).toEqual(["verified", "rewrapping", "committed"]);
      expect([existsSync(keyFile()), existsSync(stagedFile())]).toEqual([false, false]);
      expect(await judgeMasterKey(new MasterKey(next), store)).toEqual({ kind: "matches" });
      expect(notices.at(-1)).toMatch(/start the server with it \(MASTER_KEY_FILE=\/new.key/);
    });

    it("refuses a current key that does not match, and a new key equal to the current one, changing nothing", async () => {
      const old = material();
      writeFileSync(keyFile(), masterKeyFileText(old), { mode: 0o600 });
      await writeKeys(new MasterKey(old), 1);
      const before = storeSnapshot(dir.path);
      await expect(rewrapMasterKey(plan(material(), material()))).rejects.toThrow(MasterKeyMismatchError);
      await expect(rewrapMasterKey(plan(old, Buffer.from(old)))).rejects.toThrow("is the one configured now");
      expect(storeSnapshot(dir.path)).toEqual(before);
      expect(existsSync(stagedFile())).toBe(false);
    });

    it("aborts the whole transaction on a material that does not unwrap, and removes master.key.new", async () => {
      const old = material();
      writeFileSync(keyFile(), masterKeyFileText(old), { mode: 0o600 });
      await writeKeys(new MasterKey(old), 3);
      await requireMatchingMasterKey(new MasterKey(old), store, { origin: "k", dataDir: "d" }, 1);
      // The last row in re-wrap order, so that every other row has been re-wrapped when it fails.
      const last = wrappedRows().at(-1)!;
      db.prepare("UPDATE kms_versions SET wrapped_material = ? WHERE key_id = ? AND id = ?").run(randomBytes(60), last.key_id, last.id);
      const before = storeSnapshot(dir.path);
      await expect(rewrapMasterKey(plan(old, material()))).rejects.toThrow(`the stored material of key ${last.key_id} version ${last.id} does not unwrap`);
      expect(steps).toEqual(["verified", "new-key-staged", "rewrapping"]);
      expect(storeSnapshot(dir.path)).toEqual(before);
      expect(existsSync(stagedFile())).toBe(false);
      expect(readFileSync(keyFile(), "utf8")).toBe(masterKeyFileText(old));
    });
  });
});
