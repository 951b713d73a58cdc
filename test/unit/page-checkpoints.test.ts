import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type Database from "better-sqlite3";
import type { CryptoKeyRecord, KeyAggregate } from "../../src/kms/model.js";
import { openDatabase } from "../../src/storage/sqlite/database.js";
import { SqliteKmsStore } from "../../src/storage/sqlite/sqlite-kms-store.js";
import { tempDir } from "../support/temp-dir.js";

// Deep pages of listKeys seek from positions earlier pages recorded (src/storage/sqlite/page-checkpoints.ts). Every
// page must be exactly what plain OFFSET gives, which a new store on the same database (no positions recorded)
// answers, through creations, destructions, restores and the time passing a scheduled destruction.
describe("SqliteKmsStore.listKeys from recorded positions", () => {
  const T = 1_800_000_000_000;
  let dir: ReturnType<typeof tempDir>;
  let db: Database.Database;
  let store: SqliteKmsStore;

  const aggregate = (id: string, createdAt: number, over: Partial<CryptoKeyRecord> = {}): KeyAggregate => ({
    key: {
      id, parentId: "ns", name: "", description: "", owner: "o", labels: [], rotationPeriodMs: null, nextRotationAt: null,
      defaultAlgorithm: "AES_128", primaryVersionId: 1, nextVersionId: 2, createdAt, goneAt: null, ...over,
    },
    versions: [{ keyId: id, id: 1, state: "ENABLED", algorithm: "AES_128", createdAt, destroyAt: null, wrappedMaterial: Buffer.from("m") }],
  });
  const setGoneAt = (id: string, goneAt: number | null, now: number) =>
    store.mutateKey(id, now, (current) => ({ key: { ...current.key, goneAt }, versions: [], result: undefined }));

  // Every page of every size at `now`, as `store` answers it (recording positions as it goes) and as plain OFFSET does.
  async function expectPagesExact(now: number): Promise<void> {
    // Deepest first, so that each page is read from positions recorded before the change being checked.
    for (const limit of [1, 3, 7]) {
      for (let offset = 44 - (44 % limit); offset >= 0; offset -= limit) {
        const ids = async (s: SqliteKmsStore) => (await s.listKeys("ns", now, { limit, offset })).map((k) => k.key.id);
        // A new store each time, so that it has no positions of its own.
        expect(await ids(store), `limit ${limit} offset ${offset}`).toEqual(await ids(new SqliteKmsStore(db)));
      }
    }
  }

  beforeEach(async () => {
    dir = tempDir();
    db = openDatabase(dir.path, "upgrade");
    store = new SqliteKmsStore(db);
    // Three keys per millisecond, so that the order's tie-break on id matters.
    for (let i = 0; i < 40; i++) await store.createKey(aggregate(`k${String(i).padStart(2, "0")}`, T + Math.floor(i / 3)), T);
  });

  afterEach(() => {
    db.close();
    dir.remove();
  });

  it("pages exactly as OFFSET does through every kind of change", async () => {
    await expectPagesExact(T + 100);
    // A key created with an earlier time (another clock) that sorts before recorded positions.
    await store.createKey(aggregate("k00a", T), T + 100);
    await expectPagesExact(T + 100);
    // A key scheduled for destruction: still live until its goneAt, then skipped.
    await setGoneAt("k05", T + 200, T + 100);
    await expectPagesExact(T + 150);
    await expectPagesExact(T + 199);
    await expectPagesExact(T + 200);
    await expectPagesExact(T + 250);
    // Restored before its time: live again.
    await setGoneAt("k12", T + 300, T + 250);
    await expectPagesExact(T + 260);
    await setGoneAt("k12", null, T + 270);
    await expectPagesExact(T + 280);
    await expectPagesExact(T + 400);
    // Keys created later sort after every position and leave them as they are.
    await store.createKey(aggregate("a-new", T + 500), T + 500);
    await expectPagesExact(T + 500);
    // The clock going back makes positions recorded later untrusted.
    await expectPagesExact(T + 120);
  });

  it("reads a deep page by a seek from a recorded position, not by skipping from the start", () => {
    const plan = (sql: string) =>
      (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all("ns", T, T, "k", 10, 5) as { detail: string }[]).map((r) => r.detail);
    const from = plan(
      `SELECT * FROM kms_keys WHERE parent_id = ? AND (gone_at IS NULL OR gone_at > ?) AND (created_at, id) >= (?, ?)
       ORDER BY created_at, id LIMIT ? OFFSET ?`,
    );
    expect(from).toEqual(["SEARCH kms_keys USING INDEX kms_keys_by_parent (parent_id=? AND (created_at,id)>(?,?))"]);
    const goneAt = (db.prepare("EXPLAIN QUERY PLAN SELECT min(gone_at) FROM kms_keys WHERE parent_id = ? AND gone_at > ?").all("ns", T) as { detail: string }[]).map((r) => r.detail);
    expect(goneAt).toEqual(["SEARCH kms_keys USING COVERING INDEX kms_keys_gone_by_parent (parent_id=? AND gone_at>?)"]);
  });
});
