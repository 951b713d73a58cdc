import type pg from "pg";
import { alreadyExists } from "../../errors/domain-error.js";
import { NO_VERSIONS, mergeVersions } from "../../kms/model.js";
import type { CryptoKeyRecord, KeyAggregate, KeyState, VersionSelection } from "../../kms/model.js";
import type { KeyMutation, KeyPage, KmsStore, MasterKeyCheckRecord, MasterKeyStore, WrappedMaterial } from "../kms-store.js";
import { ANY_WRAPPED_MATERIAL_SQL, DUE_ROWS_PER_KEY, MASTER_KEY_CHECK_SQL, dueDestructionSql, keyFromRow, keyParams, masterKeyCheckFromRow, masterKeyCheckParams, tallyFromRow, versionFromRow, versionParams, wrappedFromRow } from "../rows.js";
import type { KeyRow, MasterKeyRow, TallyRow, VersionRow, WrappedRow } from "../rows.js";
import { PageCheckpoints } from "../page-checkpoints.js";
import { announce, changeOf, first, insert, lockKinds, lockName, noRowHas, rows, runLong, transaction } from "./sql.js";

const REWRAP_PAGE = 500;

// A version's columns beside its key's in one row of a join, prefixed so that they do not collide.
const PREFIXED_VERSION_COLUMNS = `v.key_id AS p_key_id, v.id AS p_id, v.state AS p_state, v.algorithm AS p_algorithm,
  v.created_at AS p_created_at, v.destroy_at AS p_destroy_at, v.wrapped_material AS p_wrapped_material`;

interface PrefixedVersion {
  p_key_id: string | null;
  p_id: number;
  p_state: string;
  p_algorithm: string;
  p_created_at: number;
  p_destroy_at: number | null;
  p_wrapped_material: Buffer | null;
}

function unprefixed(r: PrefixedVersion): VersionRow {
  return {
    key_id: r.p_key_id!,
    id: r.p_id,
    state: r.p_state,
    algorithm: r.p_algorithm,
    created_at: r.p_created_at,
    destroy_at: r.p_destroy_at,
    wrapped_material: r.p_wrapped_material,
  };
}

const UPSERT_VERSION_SUFFIX = `ON CONFLICT (key_id, id) DO UPDATE SET state = excluded.state, destroy_at = excluded.destroy_at,
  wrapped_material = excluded.wrapped_material`;

// Keys and versions in PostgreSQL. A mutation holds the key's row (SELECT ... FOR UPDATE) for its transaction, so
// mutations of one key from any number of servers run one after another: version ids come out 1, 2, 3 ... without
// gaps or repeats, and a due rotation or destruction, re-checked under the lock, is carried out once. A key's name
// is checked under a transaction-scoped advisory lock on its namespace and name, so two servers cannot both take
// it. Every committed change is announced (change-feed.ts), so other servers drop their cached entry.
const GET_KEY = `SELECT k.*, ${PREFIXED_VERSION_COLUMNS} FROM kms_keys k LEFT JOIN kms_versions v ON v.key_id = k.id WHERE k.id = $1 ORDER BY v.id`;

// VACUUM reads the whole table, which may take longer than the pool's statement timeout (sql.ts, createPool) on a
// large one: it has ten minutes. It waits for its lock a few seconds only: behind a conflicting lock (an
// anti-wraparound autovacuum, pg_repack, CREATE INDEX CONCURRENTLY) it waited silently for its ten minutes, then
// failed (a probe, 2026-11-28); it is tried again at the next sweep instead.
const VACUUM_TIMEOUT_MS = 10 * 60_000;
const VACUUM_LOCK_TIMEOUT_MS = 5000;
const LOCK_NOT_AVAILABLE = "55P03";

export class PostgresKmsStore implements KmsStore, MasterKeyStore {
  // Transactions on a pool of connections return in any order, and other servers write too.
  readonly commitsInOrder = false;
  // ListCryptoKeys' page positions (page-checkpoints.ts), kept only while the change feed is live: then every other
  // server's write that moves them is heard of within the feed's bound (docs/storage.md, "Deep pages").
  private readonly checkpoints = new PageCheckpoints();
  private positionsTrusted = false;

  constructor(private readonly pool: pg.Pool) {}

  // From the change feed (postgres-storage.ts). Either way what was recorded goes: on the way down because writes
  // may go unheard, on the way up because some may have.
  feedLive(live: boolean): void {
    this.positionsTrusted = live;
    this.checkpoints.forgetAll();
  }

  namespaceChanged(parentId: string): void {
    this.checkpoints.forget(parentId);
  }

  private async assertNameFree(client: pg.PoolClient, key: CryptoKeyRecord, now: number): Promise<void> {
    if (key.name === "") return;
    await lockName(client, lockKinds.kmsName, JSON.stringify([key.parentId, key.name]));
    const holder = await first<{ id: string }>(
      client,
      "SELECT id FROM kms_keys WHERE parent_id = $1 AND name = $2 AND id <> $3 AND (gone_at IS NULL OR gone_at > $4) LIMIT 1",
      [key.parentId, key.name, key.id, now],
    );
    if (holder !== null) {
      throw alreadyExists(
        "kms",
        "CRYPTO_KEY_NAME_TAKEN",
        { resourceType: "kms.v1.CryptoKey", resourceName: holder.id },
        `a key named "${key.name}" already exists in namespace ${key.parentId} (id ${holder.id})`,
      );
    }
  }

  // Locks the key's row, then reads its versions in a statement of its own: in READ COMMITTED a statement that waited
  // for the lock would not see the versions the transaction it waited for inserted, a later statement does.
  // Selected versions (KmsStore.mutateKey) are read with the tally of the others in one statement.
  private async lockState(client: pg.PoolClient, keyId: string, selection: VersionSelection): Promise<KeyState | null> {
    const row = await first<KeyRow>(client, "SELECT * FROM kms_keys WHERE id = $1 FOR UPDATE", [keyId]);
    if (row === null) return null;
    const key = keyFromRow(row);
    if (selection === "all") {
      const versions = (await rows<VersionRow>(client, "SELECT * FROM kms_versions WHERE key_id = $1 ORDER BY id", [keyId])).map(versionFromRow);
      return { key, versions, complete: true, others: NO_VERSIONS };
    }
    const ids = [...new Set(key.primaryVersionId === null ? selection.ids : [...selection.ids, key.primaryVersionId])];
    const found = await rows<TallyRow & { [column in keyof VersionRow]: VersionRow[column] | null }>(
      client,
      `WITH others AS (
         SELECT count(*) AS count, count(*) FILTER (WHERE state IN ('ENABLED', 'DISABLED')) AS live,
           max(destroy_at) FILTER (WHERE state = 'DESTROYED_SCHEDULED') AS latest
         FROM kms_versions WHERE key_id = $1 AND NOT (id = ANY($2::bigint[]))
       )
       SELECT o.*, v.* FROM others o LEFT JOIN kms_versions v ON v.key_id = $1 AND v.id = ANY($2::bigint[]) ORDER BY v.id`,
      [keyId, ids],
    );
    const versions = found.flatMap((r) => (r.key_id === null ? [] : [versionFromRow(r as VersionRow)]));
    return { key, versions, complete: false, others: tallyFromRow(found[0]!) };
  }

  private async upsertVersions(client: pg.PoolClient, aggregate: { versions: KeyAggregate["versions"] }): Promise<void> {
    for (const v of aggregate.versions) {
      const q = insert("kms_versions", versionParams(v), UPSERT_VERSION_SUFFIX);
      await client.query(q.text, q.values);
    }
  }

  async createKey(aggregate: KeyAggregate, now: number): Promise<void> {
    await transaction(this.pool, async (client) => {
      await this.assertNameFree(client, aggregate.key, now);
      const q = insert("kms_keys", keyParams(aggregate.key));
      await client.query(q.text, q.values);
      await this.upsertVersions(client, aggregate);
      await announce(client, changeOf.namespace(aggregate.key.parentId));
    });
    this.checkpoints.keyCreated(aggregate.key.parentId, aggregate.key);
  }

  async getKey(keyId: string): Promise<KeyAggregate | null> {
    if (noRowHas(keyId)) return null;
    // One statement, so one snapshot for the key and its versions (a concurrent mutation is seen whole or not at
    // all) in one round trip: this is what every server reads after another server changed the key.
    // A named statement: each pooled connection parses and plans it once, not on every cache miss (the database
    // shares the machine's cores with the server).
    const { rows: found } = await this.pool.query<KeyRow & PrefixedVersion>({ name: "kms_get_key", text: GET_KEY, values: [keyId] });
    const first = found[0];
    if (first === undefined) return null;
    return { key: keyFromRow(first), versions: found.flatMap((r) => (r.p_key_id === null ? [] : [versionFromRow(unprefixed(r))])) };
  }

  // The page's keys are found in the key order index alone (it holds gone_at), and only they are read with their
  // primary versions: joined before the OFFSET, every key skipped was read and joined too, 285-309 ms for the last
  // page of 100k keys (docs/performance.md). The OFFSET walks the index entries it skips, unless a recorded position
  // lets the walk start with a seek (page-checkpoints.ts). One row more than the page is the key at the next page's
  // offset, recorded for it; the earliest goneAt still to come in the namespace, which bounds the positions, is read
  // in the same statement, so from the same snapshot.
  async listKeys(parentId: string, now: number, page: KeyPage) {
    const generation = this.checkpoints.generation;
    const from = page.offset === 0 || !this.positionsTrusted ? null : this.checkpoints.nearest(parentId, page.offset, now);
    const found = await rows<KeyRow & PrefixedVersion & { next_gone_at: number | null }>(
      this.pool,
      `WITH page AS (
         SELECT id, created_at FROM kms_keys
         WHERE parent_id = $1 AND (gone_at IS NULL OR gone_at > $2)${from === null ? "" : " AND (created_at, id) >= ($5, $6)"}
         ORDER BY created_at, id LIMIT $3 OFFSET $4
       )
       SELECT k.*, ${PREFIXED_VERSION_COLUMNS},
         (SELECT min(gone_at) FROM kms_keys WHERE parent_id = $1 AND gone_at > $2) AS next_gone_at
       FROM page p JOIN kms_keys k ON k.id = p.id
       LEFT JOIN kms_versions v ON v.key_id = k.id AND v.id = k.primary_version_id
       ORDER BY p.created_at, p.id`,
      from === null
        ? [parentId, now, page.limit + 1, page.offset]
        : [parentId, now, page.limit + 1, page.offset - from.offset, from.key.createdAt, from.key.id],
    );
    if (this.positionsTrusted && found.length > 0) {
      const nextGoneAt = found[0]!.next_gone_at;
      const validUntil = () => nextGoneAt ?? Number.POSITIVE_INFINITY;
      const record = (offset: number, row: KeyRow | undefined) => {
        if (row !== undefined) this.checkpoints.record(parentId, offset, { createdAt: row.created_at, id: row.id }, now, validUntil, generation);
      };
      record(page.offset, found[0]);
      record(page.offset + page.limit, found[page.limit]);
    }
    return found.slice(0, page.limit).map((r) => ({ key: keyFromRow(r), primary: r.p_key_id === null ? null : versionFromRow(unprefixed(r)) }));
  }

  async mutateKey<T>(keyId: string, now: number, decide: (current: KeyState) => KeyMutation<T>, selection: VersionSelection = "all") {
    if (noRowHas(keyId)) return null;
    const outcome = await transaction(this.pool, async (client) => {
      const current = await this.lockState(client, keyId, selection);
      if (current === null) return null;
      const mutation = decide(current);
      if (mutation.key.name !== current.key.name) await this.assertNameFree(client, mutation.key, now);
      const k = keyParams(mutation.key);
      await client.query(
        `UPDATE kms_keys SET name = $2, description = $3, labels = $4, rotation_period_ms = $5, next_rotation_at = $6,
           default_algorithm = $7, primary_version_id = $8, next_version_id = $9, gone_at = $10 WHERE id = $1`,
        [k.id, k.name, k.description, k.labels, k.rotation_period_ms, k.next_rotation_at, k.default_algorithm, k.primary_version_id, k.next_version_id, k.gone_at],
      );
      await this.upsertVersions(client, mutation);
      await announce(client, changeOf.key(keyId));
      const goneChanged = mutation.key.goneAt !== current.key.goneAt;
      if (goneChanged) await announce(client, changeOf.namespace(current.key.parentId));
      return { aggregate: { key: mutation.key, versions: mergeVersions(current.versions, mutation.versions) }, result: mutation.result, goneChanged };
    });
    if (outcome !== null && outcome.goneChanged) this.checkpoints.forget(outcome.aggregate.key.parentId);
    return outcome === null ? null : { aggregate: outcome.aggregate, result: outcome.result };
  }

  async keysWithDueDestruction(now: number, limit: number): Promise<string[]> {
    const found = await rows<{ key_id: string }>(
      this.pool,
      dueDestructionSql((n) => `$${n}`),
      [now, limit * DUE_ROWS_PER_KEY, limit],
    );
    return found.map((r) => r.key_id);
  }

  async keysWithDueRotation(now: number, limit: number): Promise<string[]> {
    const found = await rows<{ id: string }>(
      this.pool,
      "SELECT id FROM kms_keys WHERE next_rotation_at IS NOT NULL AND next_rotation_at <= $1 AND (gone_at IS NULL OR gone_at > $1) LIMIT $2",
      [now, limit],
    );
    return found.map((r) => r.id);
  }

  async readMasterKeyCheck(): Promise<MasterKeyCheckRecord | null> {
    const row = await first<MasterKeyRow>(this.pool, MASTER_KEY_CHECK_SQL);
    return row === null ? null : masterKeyCheckFromRow(row);
  }

  async recordMasterKeyCheck(check: MasterKeyCheckRecord, now: number): Promise<void> {
    const q = insert("kms_master_key", { id: 1, ...masterKeyCheckParams(check, now) }, "ON CONFLICT (id) DO NOTHING");
    await this.pool.query(q.text, q.values);
  }

  async holdsKeys(): Promise<boolean> {
    return (await first(this.pool, "SELECT 1 FROM kms_keys LIMIT 1")) !== null;
  }

  async anyWrappedMaterial(): Promise<WrappedMaterial | null> {
    const row = await first<WrappedRow>(this.pool, ANY_WRAPPED_MATERIAL_SQL);
    return row === null ? null : wrappedFromRow(row);
  }

  async countWrappedMaterial(): Promise<number> {
    return (await first<{ n: number }>(this.pool, "SELECT count(*)::bigint AS n FROM kms_versions WHERE wrapped_material IS NOT NULL"))!.n;
  }

  async rewrapAll(rewrap: (material: WrappedMaterial) => Uint8Array, check: MasterKeyCheckRecord, now: number): Promise<number> {
    return transaction(this.pool, async (client) => {
      // Every key's row held, so no server changes a material while it is re-wrapped.
      await client.query("LOCK TABLE kms_keys, kms_versions IN SHARE ROW EXCLUSIVE MODE");
      let done = 0;
      let after: [string, number] = ["", -1];
      for (;;) {
        const page = await rows<WrappedRow>(
          client,
          `SELECT key_id, id, wrapped_material FROM kms_versions WHERE wrapped_material IS NOT NULL AND (key_id, id) > ($1, $2)
           ORDER BY key_id, id LIMIT $3`,
          [after[0], after[1], REWRAP_PAGE],
        );
        for (const row of page) {
          await client.query("UPDATE kms_versions SET wrapped_material = $1 WHERE key_id = $2 AND id = $3", [
            Buffer.from(rewrap(wrappedFromRow(row))),
            row.key_id,
            row.id,
          ]);
          await announce(client, changeOf.key(row.key_id));
          done++;
        }
        const last = page[page.length - 1];
        if (page.length < REWRAP_PAGE || last === undefined) break;
        after = [last.key_id, last.id];
      }
      const q = insert(
        "kms_master_key",
        { id: 1, ...masterKeyCheckParams(check, now) },
        `ON CONFLICT (id) DO UPDATE SET scheme = excluded.scheme, key_id = excluded.key_id, check_value = excluded.check_value,
           recorded_at = excluded.recorded_at`,
      );
      await client.query(q.text, q.values);
      return done;
    });
  }

  // The pool belongs to the storage (postgres-storage.ts), which ends it.
  // The erasing UPDATE left the row's previous version, material included, as a dead tuple until autovacuum comes by;
  // VACUUM removes it now. What PostgreSQL keeps beyond its tables (its write-ahead log, free space within pages,
  // backups) is the operator's to bound (docs/storage.md, "Erased material").
  async scrubErased(): Promise<boolean> {
    try {
      await runLong(this.pool, "VACUUM kms_versions", VACUUM_TIMEOUT_MS, VACUUM_LOCK_TIMEOUT_MS);
      return true;
    } catch (err) {
      if ((err as { code?: unknown }).code === LOCK_NOT_AVAILABLE) return false;
      throw err;
    }
  }

  async close(): Promise<void> {}
}
