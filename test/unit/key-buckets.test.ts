import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { CryptoKeyRecord, KeyAggregate } from "../../src/kms/model.js";
import { migrate } from "../../src/storage/sqlite/migrations.js";
import { SqliteKmsStore } from "../../src/storage/sqlite/sqlite-kms-store.js";

// The embedded store counts its keys in buckets of the key order (migration 8, kept by triggers), so that the first
// read of a deep page of listKeys starts near it instead of skipping from the start. Every page must still be exactly
// what plain OFFSET gives, and the counts must be right after every kind of write, whoever makes it.
describe("SqliteKmsStore key buckets", () => {
  const T = 1_800_000_000_000;
  let db: Database.Database;
  let store: SqliteKmsStore;
  let seed = 11;
  const random = (n: number) => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed % n;
  };

  const aggregate = (id: string, parentId: string, createdAt: number, over: Partial<CryptoKeyRecord> = {}): KeyAggregate => ({
    key: {
      id, parentId, name: "", description: "", owner: "o", labels: [], rotationPeriodMs: null, nextRotationAt: null,
      defaultAlgorithm: "AES_128", primaryVersionId: 1, nextVersionId: 2, createdAt, goneAt: null, ...over,
    },
    versions: [{ keyId: id, id: 1, state: "ENABLED", algorithm: "AES_128", createdAt, destroyAt: null, wrappedMaterial: Buffer.from("m") }],
  });
  const setGoneAt = (id: string, goneAt: number | null, now: number) =>
    store.mutateKey(id, now, (current) => ({ key: { ...current.key, goneAt }, versions: [], result: undefined }));

  // Each bucket's counts against the keys actually in its range.
  function expectCountsRight(): void {
    const rows = db
      .prepare(
        `SELECT b.parent_id, b.total, b.standing,
           (SELECT count(*) FROM kms_keys k WHERE k.parent_id = b.parent_id AND (k.created_at, k.id) >= (b.first_created_at, b.first_id)
              AND (n.first_created_at IS NULL OR (k.created_at, k.id) < (n.first_created_at, n.first_id))) AS counted_total,
           (SELECT count(*) FROM kms_keys k WHERE k.parent_id = b.parent_id AND k.gone_at IS NULL AND (k.created_at, k.id) >= (b.first_created_at, b.first_id)
              AND (n.first_created_at IS NULL OR (k.created_at, k.id) < (n.first_created_at, n.first_id))) AS counted_standing
         FROM kms_key_buckets b
         LEFT JOIN kms_key_buckets n ON n.parent_id = b.parent_id AND (n.first_created_at, n.first_id) = (
           SELECT first_created_at, first_id FROM kms_key_buckets WHERE parent_id = b.parent_id AND (first_created_at, first_id) > (b.first_created_at, b.first_id)
           ORDER BY first_created_at, first_id LIMIT 1)`,
      )
      .all() as { parent_id: string; total: number; standing: number; counted_total: number; counted_standing: number }[];
    for (const r of rows) expect([r.total, r.standing], r.parent_id).toEqual([r.counted_total, r.counted_standing]);
    // No key before its namespace's first bucket.
    const before = db
      .prepare(
        `SELECT count(*) FROM kms_keys k WHERE (k.created_at, k.id) < (
           SELECT first_created_at, first_id FROM kms_key_buckets WHERE parent_id = k.parent_id ORDER BY first_created_at, first_id LIMIT 1)`,
      )
      .pluck()
      .get();
    expect(before).toBe(0);
  }

  // Pages at offsets all through the namespace, from a store with no recorded positions, against plain OFFSET.
  async function expectPagesExact(parentId: string, now: number): Promise<void> {
    const plain = db.prepare(
      "SELECT id FROM kms_keys WHERE parent_id = ? AND (gone_at IS NULL OR gone_at > ?) ORDER BY created_at, id LIMIT ? OFFSET ?",
    );
    const live = db.prepare("SELECT count(*) FROM kms_keys WHERE parent_id = ? AND (gone_at IS NULL OR gone_at > ?)").pluck().get(parentId, now) as number;
    for (let offset = 0; offset <= live + 5; offset += 1 + random(400)) {
      const fresh = new SqliteKmsStore(db);
      const got = (await fresh.listKeys(parentId, now, { limit: 7, offset })).map((k) => k.key.id);
      expect(got, `${parentId} offset ${offset} at ${now - T}`).toEqual((plain.pluck().all(parentId, now, 7, offset) as string[]));
    }
  }

  beforeEach(() => {
    db = new Database(":memory:");
    migrate(db, "upgrade");
    store = new SqliteKmsStore(db);
  });

  afterEach(() => {
    db.close();
  });

  it("counts right and pages exactly through appends, keys out of order, destructions, restores, due times and other writers", async () => {
    const ids: string[] = [];
    // Appends, three per millisecond (the id breaks ties), in two namespaces; now and then a key with an earlier
    // time, as another clock would make, which lands inside a bucket or before the first.
    for (let i = 0; i < 5000; i++) {
      const parentId = i % 5 === 0 ? "other" : "ns";
      const createdAt = i % 97 === 0 ? T - 10 + random(Math.floor(i / 3) + 10) : T + Math.floor(i / 3);
      const id = `k${String(i).padStart(5, "0")}`;
      ids.push(id);
      await store.createKey(aggregate(id, parentId, createdAt), T);
    }
    expect(db.prepare("SELECT count(*) FROM kms_key_buckets WHERE parent_id = 'ns'").pluck().get()).toBeGreaterThan(3);
    expectCountsRight();
    await expectPagesExact("ns", T + 5000);
    await expectPagesExact("other", T + 5000);

    // Destructions due at several times, destructions already due, and restores.
    for (let n = 0; n < 600; n++) {
      const id = ids[random(ids.length)]!;
      const choice = random(3);
      await setGoneAt(id, choice === 0 ? null : T + 6000 + random(2000) * (choice === 1 ? 1 : -1), T + 6000);
    }
    expectCountsRight();
    for (const now of [T + 4000, T + 6000, T + 7000, T + 9000]) await expectPagesExact("ns", now);

    // Rows another writer makes and removes (an operator's SQL, the scale bench): the triggers count them too.
    const insert = db.prepare(
      `INSERT INTO kms_keys (id, parent_id, name, description, owner, labels, rotation_period_ms, next_rotation_at, default_algorithm,
         primary_version_id, next_version_id, created_at, gone_at) VALUES (?, 'ns', '', '', 'o', '[]', NULL, NULL, 'AES_128', NULL, 1, ?, ?)`,
    );
    for (let n = 0; n < 300; n++) insert.run(`x${n}`, T + 20_000 + n, n % 4 === 0 ? T + 8000 : null);
    db.prepare("DELETE FROM kms_versions WHERE key_id IN (SELECT id FROM kms_keys WHERE id LIKE 'k01%')").run();
    db.prepare("DELETE FROM kms_keys WHERE id LIKE 'k01%'").run();
    expectCountsRight();
    for (const now of [T + 7000, T + 9000]) await expectPagesExact("ns", now);

    // A key never moves: its namespace, time and id are fixed, which the counts rely on.
    expect(() => db.prepare("UPDATE kms_keys SET created_at = created_at + 1 WHERE id = 'k00001'").run()).toThrow(/keeps its namespace/);
  });

  it("counts the keys a store had before the buckets existed", async () => {
    for (let i = 0; i < 3000; i++) await store.createKey(aggregate(`k${String(i).padStart(5, "0")}`, "ns", T + Math.floor(i / 2), { goneAt: i % 7 === 0 ? T + 1 : null }), T);
    // Back to migration 7, then up again: the migration counts what is there.
    db.exec(`DROP TRIGGER kms_keys_bucket_insert; DROP TRIGGER kms_keys_bucket_delete; DROP TRIGGER kms_keys_bucket_gone; DROP TRIGGER kms_keys_no_moves;
      DROP TABLE kms_key_buckets; DELETE FROM schema_migrations WHERE version = 8`);
    migrate(db, "upgrade");
    expect(db.prepare("SELECT count(*), sum(total), sum(standing) FROM kms_key_buckets").raw().get()).toEqual([3, 3000, 3000 - Math.ceil(3000 / 7)]);
    expectCountsRight();
    await expectPagesExact("ns", T);
    await expectPagesExact("ns", T + 2);
  });

  it("finds a page's bucket by seeks: the namespace's buckets by their primary key, its keys with a goneAt by their index", () => {
    // The statements of sqlite-kms-store.ts's bucketStart. The second one walked the whole key order index (for its
    // ORDER BY) until it named the index of keys with a goneAt: 12.9 ms instead of 0.7 for a deep page of 300k keys.
    const plan = (sql: string, ...params: unknown[]) => (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[]).map((r) => r.detail).join(" | ");
    expect(plan("SELECT first_created_at, first_id, standing FROM kms_key_buckets WHERE parent_id = ? ORDER BY first_created_at, first_id", "ns")).toMatch(
      /SEARCH kms_key_buckets USING INDEX sqlite_autoindex_kms_key_buckets_1 \(parent_id=\?\)/,
    );
    expect(
      plan(
        `SELECT created_at, id FROM kms_keys INDEXED BY kms_keys_gone_by_parent
         WHERE parent_id = ? AND gone_at IS NOT NULL AND gone_at > ? ORDER BY created_at, id`,
        "ns",
        T,
      ),
    ).toMatch(/SEARCH kms_keys USING INDEX kms_keys_gone_by_parent \(parent_id=\? AND gone_at>\?\)/);
  });
});
