import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CryptoKeyRecord, KeyAggregate } from "../../src/kms/model.js";
import { createLogger } from "../../src/logger.js";
import { openPostgresStorage } from "../../src/storage/postgres/postgres-storage.js";
import type { ChangeListener, Storage } from "../../src/storage/storage.js";
import { createDatabase, postgresAvailable } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";

// Deep pages of ListCryptoKeys on PostgreSQL seek from positions earlier pages recorded (page-checkpoints.ts), kept
// while the change feed is live. Every page must be what plain OFFSET answers (a storage that never watches the feed,
// so never keeps a position), through changes made by the same server and by another one.

const logger = createLogger("silent");
const pgUp = await postgresAvailable();
const T = 1_800_000_000_000;
const NS = "pages";

const quiet: ChangeListener = { keyChanged() {}, accessChanged() {}, taskStored() {}, taskFinished() {}, feedLive() {} };

const aggregate = (id: string, createdAt: number, over: Partial<CryptoKeyRecord> = {}): KeyAggregate => ({
  key: {
    id, parentId: NS, name: "", description: "", owner: "o", labels: [], rotationPeriodMs: null, nextRotationAt: null,
    defaultAlgorithm: "AES_128", primaryVersionId: 1, nextVersionId: 2, createdAt, goneAt: null, ...over,
  },
  versions: [{ keyId: id, id: 1, state: "ENABLED", algorithm: "AES_128", createdAt, destroyAt: null, wrappedMaterial: Buffer.from("m") }],
});

describe.skipIf(!pgUp)("PostgresKmsStore.listKeys from recorded positions", () => {
  let db: TestDatabase;
  // `here` and `there` are two servers with live feeds; `plain` never watches, so it always reads with plain OFFSET.
  let here: Storage;
  let there: Storage;
  let plain: Storage;

  const setGoneAt = (s: Storage, id: string, goneAt: number | null, now: number) =>
    s.kms.mutateKey(id, now, (current) => ({ key: { ...current.key, goneAt }, versions: [], result: undefined }));
  const ids = async (s: Storage, now: number, limit: number, offset: number) =>
    (await s.kms.listKeys(NS, now, { limit, offset })).map((k) => k.key.id);

  // Every page of every size at `now` as `here` answers it and as plain OFFSET does; deepest first, so that each
  // page is read from positions recorded before the change being checked. The mismatches, empty when exact.
  async function mismatches(now: number): Promise<string[]> {
    const wrong: string[] = [];
    for (const limit of [1, 3, 7]) {
      for (let offset = 44 - (44 % limit); offset >= 0; offset -= limit) {
        const [got, want] = [await ids(here, now, limit, offset), await ids(plain, now, limit, offset)];
        if (JSON.stringify(got) !== JSON.stringify(want)) wrong.push(`limit ${limit} offset ${offset}: ${got.join(",")} != ${want.join(",")}`);
      }
    }
    return wrong;
  }

  // After another server's change: exact once the feed has brought it (well within a second), and never wrong
  // for longer.
  async function exactWithinASecond(now: number): Promise<void> {
    const start = Date.now();
    let wrong = await mismatches(now);
    while (wrong.length > 0 && Date.now() - start < 1000) {
      await new Promise((r) => setTimeout(r, 20));
      wrong = await mismatches(now);
    }
    expect(wrong).toEqual([]);
  }

  beforeAll(async () => {
    db = await createDatabase();
    const open = () => openPostgresStorage({ url: db.url, poolSize: 4, queryTimeoutMs: 10_000 }, logger);
    [here, there, plain] = await Promise.all([open(), open(), open()]);
    await here.watch(quiet);
    await there.watch(quiet);
    // Three keys per millisecond, so that the order's tie-break on id matters.
    for (let i = 0; i < 40; i++) await here.kms.createKey(aggregate(`k${String(i).padStart(2, "0")}`, T + Math.floor(i / 3)), T);
  });
  afterAll(async () => {
    for (const s of [here, there, plain]) await s?.close();
    await db?.drop();
  });

  it("pages exactly as OFFSET does through changes made by this server", async () => {
    expect(await mismatches(T + 100)).toEqual([]);
    // A key created with an earlier time (another clock) that sorts before recorded positions.
    await here.kms.createKey(aggregate("k00a", T), T + 100);
    expect(await mismatches(T + 100)).toEqual([]);
    // A key scheduled for destruction: live until its goneAt, then skipped.
    await setGoneAt(here, "k05", T + 200, T + 100);
    for (const now of [T + 150, T + 199, T + 200, T + 250]) expect(await mismatches(now)).toEqual([]);
    // Restored: live again.
    await setGoneAt(here, "k05", null, T + 260);
    expect(await mismatches(T + 280)).toEqual([]);
  });

  it("pages exactly as OFFSET does through changes made by another server, once its feed has told", async () => {
    expect(await mismatches(T + 300)).toEqual([]);
    await there.kms.createKey(aggregate("k00b", T), T + 300);
    await exactWithinASecond(T + 300);
    await setGoneAt(there, "k07", T + 400, T + 300);
    await exactWithinASecond(T + 350);
    expect(await mismatches(T + 400)).toEqual([]);
    await setGoneAt(there, "k07", null, T + 450);
    await exactWithinASecond(T + 460);
  });

  it("reads a deep page from a recorded position by an index seek", async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const { rows } = await client.query(
        `EXPLAIN SELECT id, created_at FROM kms_keys WHERE parent_id = $1 AND (gone_at IS NULL OR gone_at > $2)
           AND (created_at, id) >= ($5, $6) ORDER BY created_at, id LIMIT $3 OFFSET $4`,
        [NS, T, 10, 5, T, "k"],
      );
      const plan = rows.map((r: { "QUERY PLAN": string }) => r["QUERY PLAN"]).join("\n");
      expect(plan).toMatch(/Index (Only )?Scan using kms_keys_by_parent/);
      expect(plan).toMatch(/Index Cond: .*ROW\(created_at, id\) >= ROW/);
    } finally {
      await client.end();
    }
  });
});
