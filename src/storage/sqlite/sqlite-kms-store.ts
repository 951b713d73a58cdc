import type Database from "better-sqlite3";
import { alreadyExists } from "../../errors/domain-error.js";
import { NO_VERSIONS, mergeVersions } from "../../kms/model.js";
import type { CryptoKeyRecord, KeyAggregate, KeyState, VersionSelection } from "../../kms/model.js";
import type { KeyMutation, KeyPage, KmsStore, MasterKeyCheckRecord, MasterKeyStore, WrappedMaterial } from "../kms-store.js";
import { GroupCommit } from "./group-commit.js";
import { PageCheckpoints } from "../page-checkpoints.js";
import type { KeyPosition } from "../page-checkpoints.js";
import { ANY_WRAPPED_MATERIAL_SQL, DUE_ROWS_PER_KEY, MASTER_KEY_CHECK_SQL, dueDestructionSql, keyFromRow, keyParams, masterKeyCheckFromRow, masterKeyCheckParams, tallyFromRow, versionFromRow, versionParams, wrappedFromRow } from "../rows.js";
import type { KeyRow, MasterKeyRow, TallyRow, VersionRow, WrappedRow } from "../rows.js";

// Re-wrapping reads the materials in pages, since better-sqlite3 runs no write while a read is still iterating.
const REWRAP_PAGE = 500;
// Keys a bucket of the key order holds (migration 8): a recorded position closer than this to a page is used as is.
const BUCKET_KEYS = 1024;

// Whether a key at (createdAt, id) sorts before a bucket's first position.
function positionBefore(key: [number, string], bucket: [number, string, number]): boolean {
  return key[0] < bucket[0] || (key[0] === bucket[0] && key[1] < bucket[1]);
}

// better-sqlite3 is synchronous, so each method runs to completion without interleaving; transactions make
// the multi-row writes atomic and durable before the promise resolves. Key creations and mutations, the writes
// many callers make at once, share commits (group-commit.ts).
// How long the event loop may wait for the write-ahead log to be free for scrubErased, once after a sweep erased
// material.
const SCRUB_WAIT_MS = 100;

export class SqliteKmsStore implements KmsStore, MasterKeyStore {
  // Group commits run one after another and resolve in order (group-commit.ts), and the data directory's lock keeps
  // every other server out.
  readonly commitsInOrder: boolean = true;
  private readonly stmt;
  private readonly group: GroupCommit;
  private readonly checkpoints = new PageCheckpoints();

  constructor(private readonly db: Database.Database) {
    this.group = new GroupCommit(db);
    this.stmt = {
      insertKey: db.prepare(
        `INSERT INTO kms_keys VALUES (@id, @parent_id, @name, @description, @owner, @labels, @rotation_period_ms,
           @next_rotation_at, @default_algorithm, @primary_version_id, @next_version_id, @created_at, @gone_at)`,
      ),
      updateKey: db.prepare(
        `UPDATE kms_keys SET name = @name, description = @description, labels = @labels,
           rotation_period_ms = @rotation_period_ms, next_rotation_at = @next_rotation_at,
           default_algorithm = @default_algorithm, primary_version_id = @primary_version_id,
           next_version_id = @next_version_id, gone_at = @gone_at WHERE id = @id`,
      ),
      upsertVersion: db.prepare(
        `INSERT INTO kms_versions VALUES (@key_id, @id, @state, @algorithm, @created_at, @destroy_at, @wrapped_material)
         ON CONFLICT (key_id, id) DO UPDATE SET state = excluded.state, destroy_at = excluded.destroy_at,
           wrapped_material = excluded.wrapped_material`,
      ),
      getKey: db.prepare("SELECT * FROM kms_keys WHERE id = ?"),
      getVersions: db.prepare("SELECT * FROM kms_versions WHERE key_id = ? ORDER BY id"),
      getVersion: db.prepare("SELECT * FROM kms_versions WHERE key_id = ? AND id = ?"),
      // The versions a mutation did not select (a JSON array of the selected ids), counted in SQLite: a pass over the
      // key's rows without making an object of each.
      tallyOthers: db.prepare(
        `SELECT count(*) AS count, coalesce(sum(state IN ('ENABLED', 'DISABLED')), 0) AS live,
           max(CASE WHEN state = 'DESTROYED_SCHEDULED' THEN destroy_at END) AS latest
         FROM kms_versions WHERE key_id = ? AND id NOT IN (SELECT value FROM json_each(?))`,
      ),
      nameHolder: db.prepare(
        `SELECT id FROM kms_keys WHERE parent_id = ? AND name = ? AND id <> ? AND (gone_at IS NULL OR gone_at > ?) LIMIT 1`,
      ),
      listKeys: db.prepare(
        `SELECT * FROM kms_keys WHERE parent_id = ? AND (gone_at IS NULL OR gone_at > ?)
         ORDER BY created_at, id LIMIT ? OFFSET ?`,
      ),
      // From a known position on (page-checkpoints.ts): an index seek to the key, then OFFSET skips the rest.
      listKeysFrom: db.prepare(
        `SELECT * FROM kms_keys WHERE parent_id = ? AND (gone_at IS NULL OR gone_at > ?) AND (created_at, id) >= (?, ?)
         ORDER BY created_at, id LIMIT ? OFFSET ?`,
      ),
      nextGoneAt: db.prepare("SELECT min(gone_at) FROM kms_keys WHERE parent_id = ? AND gone_at > ?"),
      buckets: db
        .prepare("SELECT first_created_at, first_id, standing FROM kms_key_buckets WHERE parent_id = ? ORDER BY first_created_at, first_id")
        .raw(),
      // Keys with a goneAt still to come: live, but not counted as standing. Through the index of keys with a goneAt
      // (few), sorted after: the planner would rather walk the key order index for the ORDER BY, every key of it.
      scheduled: db
        .prepare(
          `SELECT created_at, id FROM kms_keys INDEXED BY kms_keys_gone_by_parent
           WHERE parent_id = ? AND gone_at IS NOT NULL AND gone_at > ? ORDER BY created_at, id`,
        )
        .raw(),
      dueDestruction: db.prepare(dueDestructionSql(() => "?")),
      dueRotation: db.prepare(
        `SELECT id FROM kms_keys WHERE next_rotation_at IS NOT NULL AND next_rotation_at <= @now
           AND (gone_at IS NULL OR gone_at > @now) LIMIT @limit`,
      ),
      getMasterKeyCheck: db.prepare(MASTER_KEY_CHECK_SQL),
      insertMasterKeyCheck: db.prepare(
        `INSERT INTO kms_master_key VALUES (1, @scheme, @key_id, @check_value, @recorded_at) ON CONFLICT (id) DO NOTHING`,
      ),
      replaceMasterKeyCheck: db.prepare(
        `INSERT INTO kms_master_key VALUES (1, @scheme, @key_id, @check_value, @recorded_at) ON CONFLICT (id) DO UPDATE SET
           scheme = excluded.scheme, key_id = excluded.key_id, check_value = excluded.check_value, recorded_at = excluded.recorded_at`,
      ),
      anyKey: db.prepare("SELECT 1 FROM kms_keys LIMIT 1"),
      anyWrapped: db.prepare(ANY_WRAPPED_MATERIAL_SQL),
      countWrapped: db.prepare("SELECT count(*) FROM kms_versions WHERE wrapped_material IS NOT NULL"),
      wrappedPage: db.prepare(
        `SELECT key_id, id, wrapped_material FROM kms_versions WHERE wrapped_material IS NOT NULL AND (key_id, id) > (?, ?)
         ORDER BY key_id, id LIMIT ?`,
      ),
      setWrapped: db.prepare("UPDATE kms_versions SET wrapped_material = ? WHERE key_id = ? AND id = ?"),
    };
  }

  private assertNameFree(key: CryptoKeyRecord, now: number): void {
    if (key.name === "") return;
    const holder = this.stmt.nameHolder.pluck().get(key.parentId, key.name, key.id, now) as string | undefined;
    if (holder !== undefined) {
      throw alreadyExists(
        "kms",
        "CRYPTO_KEY_NAME_TAKEN",
        { resourceType: "kms.v1.CryptoKey", resourceName: holder },
        `a key named "${key.name}" already exists in namespace ${key.parentId} (id ${holder})`,
      );
    }
  }

  private readAggregate(keyId: string): KeyAggregate | null {
    const row = this.stmt.getKey.get(keyId) as KeyRow | undefined;
    if (row === undefined) return null;
    const versions = (this.stmt.getVersions.all(keyId) as VersionRow[]).map(versionFromRow);
    return { key: keyFromRow(row), versions };
  }

  // The key with the versions selected and the primary, each by its primary key, and the tally of the others.
  private readState(keyId: string, selection: VersionSelection): KeyState | null {
    if (selection === "all") {
      const aggregate = this.readAggregate(keyId);
      return aggregate === null ? null : { ...aggregate, complete: true, others: NO_VERSIONS };
    }
    const row = this.stmt.getKey.get(keyId) as KeyRow | undefined;
    if (row === undefined) return null;
    const key = keyFromRow(row);
    const ids = [...new Set(key.primaryVersionId === null ? selection.ids : [...selection.ids, key.primaryVersionId])].sort((a, b) => a - b);
    const versions = ids.flatMap((id) => {
      const version = this.stmt.getVersion.get(keyId, id) as VersionRow | undefined;
      return version === undefined ? [] : [versionFromRow(version)];
    });
    const others = tallyFromRow(this.stmt.tallyOthers.get(keyId, JSON.stringify(versions.map((v) => v.id))) as TallyRow);
    return { key, versions, complete: false, others };
  }

  createKey(aggregate: KeyAggregate, now: number): Promise<void> {
    return this.group.run(() => {
      this.assertNameFree(aggregate.key, now);
      this.stmt.insertKey.run(keyParams(aggregate.key));
      for (const v of aggregate.versions) this.stmt.upsertVersion.run(versionParams(v));
      this.checkpoints.keyCreated(aggregate.key.parentId, aggregate.key);
    });
  }

  async getKey(keyId: string): Promise<KeyAggregate | null> {
    return this.readAggregate(keyId);
  }

  // A page at an offset starts from the nearest position known before it: one an earlier page recorded
  // (page-checkpoints.ts), or else the start of the bucket the offset falls in (bucketStart); OFFSET skips the rest.
  async listKeys(parentId: string, now: number, page: KeyPage) {
    const generation = this.checkpoints.generation;
    let from = page.offset === 0 ? null : this.checkpoints.nearest(parentId, page.offset, now);
    if (page.offset > 0 && (from === null || page.offset - from.offset > BUCKET_KEYS)) {
      const bucket = this.bucketStart(parentId, now, page.offset);
      if (bucket !== null && (from === null || bucket.offset > from.offset)) from = bucket;
    }
    // One row more than the page: the key at the next page's offset, recorded for it.
    const rows = (
      from === null
        ? this.stmt.listKeys.all(parentId, now, page.limit + 1, page.offset)
        : this.stmt.listKeysFrom.all(parentId, now, from.key.createdAt, from.key.id, page.limit + 1, page.offset - from.offset)
    ) as KeyRow[];
    const validUntil = () => (this.stmt.nextGoneAt.pluck().get(parentId, now) as number | null) ?? Number.POSITIVE_INFINITY;
    const record = (offset: number, row: KeyRow | undefined) => {
      if (row !== undefined) this.checkpoints.record(parentId, offset, { createdAt: row.created_at, id: row.id }, now, validUntil, generation);
    };
    record(page.offset, rows[0]);
    record(page.offset + page.limit, rows[page.limit]);
    return rows.slice(0, page.limit).map((r) => {
      const key = keyFromRow(r);
      const primaryRow =
        key.primaryVersionId === null ? undefined : (this.stmt.getVersion.get(key.id, key.primaryVersionId) as VersionRow | undefined);
      return { key, primary: primaryRow === undefined ? null : versionFromRow(primaryRow) };
    });
  }

  // Where the live key at `offset` is, to within a bucket (migration 8): the start of the bucket it is in and the
  // offset of that bucket's first live key, from the buckets' counts of standing keys plus the keys with a goneAt
  // still to come. Null when the namespace has one bucket or none: the walk from its start is as short.
  private bucketStart(parentId: string, now: number, offset: number): { offset: number; key: KeyPosition } | null {
    const buckets = this.stmt.buckets.all(parentId) as [number, string, number][];
    if (buckets.length < 2) return null;
    const scheduled = this.stmt.scheduled.all(parentId, now) as [number, string][];
    let before = 0;
    let s = 0;
    for (let i = 0; i < buckets.length; i++) {
      const [createdAt, id, standing] = buckets[i]!;
      const next = buckets[i + 1];
      let live = standing;
      // The scheduled keys in this bucket: from its first position (no key is before the first bucket's) to the next's.
      while (s < scheduled.length && (next === undefined || positionBefore(scheduled[s]!, next))) {
        live++;
        s++;
      }
      if (before + live > offset || next === undefined) return { offset: before, key: { createdAt, id } };
      before += live;
    }
    return null;
  }

  mutateKey<T>(keyId: string, now: number, decide: (current: KeyState) => KeyMutation<T>, selection: VersionSelection = "all") {
    return this.group.run(() => {
      const current = this.readState(keyId, selection);
      if (current === null) return null;
      const mutation = decide(current);
      if (mutation.key.name !== current.key.name) this.assertNameFree(mutation.key, now);
      this.stmt.updateKey.run(keyParams(mutation.key));
      if (mutation.key.goneAt !== current.key.goneAt) this.checkpoints.forget(current.key.parentId);
      for (const v of mutation.versions) this.stmt.upsertVersion.run(versionParams(v));
      return { aggregate: { key: mutation.key, versions: mergeVersions(current.versions, mutation.versions) }, result: mutation.result };
    });
  }

  async keysWithDueDestruction(now: number, limit: number): Promise<string[]> {
    return this.stmt.dueDestruction.pluck().all(now, limit * DUE_ROWS_PER_KEY, limit) as string[];
  }

  async keysWithDueRotation(now: number, limit: number): Promise<string[]> {
    return this.stmt.dueRotation.pluck().all({ now, limit }) as string[];
  }

  async readMasterKeyCheck(): Promise<MasterKeyCheckRecord | null> {
    const row = this.stmt.getMasterKeyCheck.get() as MasterKeyRow | undefined;
    return row === undefined ? null : masterKeyCheckFromRow(row);
  }

  async recordMasterKeyCheck(check: MasterKeyCheckRecord, now: number): Promise<void> {
    this.stmt.insertMasterKeyCheck.run(masterKeyCheckParams(check, now));
  }

  async holdsKeys(): Promise<boolean> {
    return this.stmt.anyKey.get() !== undefined;
  }

  async anyWrappedMaterial(): Promise<WrappedMaterial | null> {
    const row = this.stmt.anyWrapped.get() as WrappedRow | undefined;
    return row === undefined ? null : wrappedFromRow(row);
  }

  async countWrappedMaterial(): Promise<number> {
    return this.stmt.countWrapped.pluck().get() as number;
  }

  async rewrapAll(rewrap: (material: WrappedMaterial) => Uint8Array, check: MasterKeyCheckRecord, now: number): Promise<number> {
    return this.db
      .transaction(() => {
        let done = 0;
        let after: [string, number] = ["", -1];
        for (;;) {
          const rows = this.stmt.wrappedPage.all(after[0], after[1], REWRAP_PAGE) as WrappedRow[];
          for (const row of rows) {
            this.stmt.setWrapped.run(Buffer.from(rewrap(wrappedFromRow(row))), row.key_id, row.id);
            done++;
          }
          const last = rows[rows.length - 1];
          if (rows.length < REWRAP_PAGE || last === undefined) break;
          after = [last.key_id, last.id];
        }
        this.stmt.replaceMasterKeyCheck.run(masterKeyCheckParams(check, now));
        return done;
      })
      .immediate();
  }

  // The write-ahead log keeps every page as it was written, the erased material's included, until it is written over
  // after the log starts again. A TRUNCATE checkpoint copies the log into the database (whose pages secure_delete
  // has zeroed) and empties it. It needs the log to itself for a moment: it waits at most SCRUB_WAIT_MS for the
  // checkpoint worker or a reader (an operator command), else reports false and the sweeper tries again later.
  async scrubErased(): Promise<boolean> {
    const wait = this.db.pragma("busy_timeout", { simple: true }) as number;
    this.db.pragma(`busy_timeout = ${SCRUB_WAIT_MS}`);
    try {
      const [result] = this.db.pragma("wal_checkpoint(TRUNCATE)") as { busy: number }[];
      return result?.busy === 0;
    } finally {
      this.db.pragma(`busy_timeout = ${wait}`);
    }
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
