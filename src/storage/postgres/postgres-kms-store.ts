import type pg from "pg";
import { alreadyExists } from "../../errors/domain-error.js";
import { mergeVersions } from "../../kms/model.js";
import type { CryptoKeyRecord, KeyAggregate } from "../../kms/model.js";
import type { KeyMutation, KeyPage, KmsStore, MasterKeyCheckRecord, MasterKeyStore, WrappedMaterial } from "../kms-store.js";
import { keyFromRow, keyParams, masterKeyCheckFromRow, masterKeyCheckParams, versionFromRow, versionParams, wrappedFromRow } from "../rows.js";
import type { KeyRow, MasterKeyRow, VersionRow, WrappedRow } from "../rows.js";
import { announce, changeOf, first, insert, lockKinds, lockName, rows, transaction } from "./sql.js";

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
export class PostgresKmsStore implements KmsStore, MasterKeyStore {
  constructor(private readonly pool: pg.Pool) {}

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
  private async lockAggregate(client: pg.PoolClient, keyId: string): Promise<KeyAggregate | null> {
    const row = await first<KeyRow>(client, "SELECT * FROM kms_keys WHERE id = $1 FOR UPDATE", [keyId]);
    if (row === null) return null;
    const versions = (await rows<VersionRow>(client, "SELECT * FROM kms_versions WHERE key_id = $1 ORDER BY id", [keyId])).map(versionFromRow);
    return { key: keyFromRow(row), versions };
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
    });
  }

  async getKey(keyId: string): Promise<KeyAggregate | null> {
    // One statement, so one snapshot for the key and its versions (a concurrent mutation is seen whole or not at
    // all) in one round trip: this is what every server reads after another server changed the key.
    const found = await rows<KeyRow & PrefixedVersion>(
      this.pool,
      `SELECT k.*, ${PREFIXED_VERSION_COLUMNS} FROM kms_keys k LEFT JOIN kms_versions v ON v.key_id = k.id WHERE k.id = $1 ORDER BY v.id`,
      [keyId],
    );
    const first = found[0];
    if (first === undefined) return null;
    return { key: keyFromRow(first), versions: found.flatMap((r) => (r.p_key_id === null ? [] : [versionFromRow(unprefixed(r))])) };
  }

  // The page's keys are found in the key order index alone (it holds gone_at), and only they are read with their
  // primary versions: joined before the OFFSET, every key skipped was read and joined too, 285-309 ms for the last
  // page of 100k keys (docs/performance.md). The OFFSET itself still walks the index entries it skips; the embedded
  // store also seeks from positions it recorded, which a store shared by several servers cannot keep (see there).
  async listKeys(parentId: string, now: number, page: KeyPage) {
    const found = await rows<KeyRow & PrefixedVersion>(
      this.pool,
      `WITH page AS (
         SELECT id, created_at FROM kms_keys
         WHERE parent_id = $1 AND (gone_at IS NULL OR gone_at > $2)
         ORDER BY created_at, id LIMIT $3 OFFSET $4
       )
       SELECT k.*, ${PREFIXED_VERSION_COLUMNS}
       FROM page p JOIN kms_keys k ON k.id = p.id
       LEFT JOIN kms_versions v ON v.key_id = k.id AND v.id = k.primary_version_id
       ORDER BY p.created_at, p.id`,
      [parentId, now, page.limit, page.offset],
    );
    return found.map((r) => ({ key: keyFromRow(r), primary: r.p_key_id === null ? null : versionFromRow(unprefixed(r)) }));
  }

  async mutateKey<T>(keyId: string, now: number, decide: (current: KeyAggregate) => KeyMutation<T>) {
    return transaction(this.pool, async (client) => {
      const current = await this.lockAggregate(client, keyId);
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
      return { aggregate: { key: mutation.key, versions: mergeVersions(current.versions, mutation.versions) }, result: mutation.result };
    });
  }

  async keysWithDueDestruction(now: number, limit: number): Promise<string[]> {
    const found = await rows<{ key_id: string }>(
      this.pool,
      `SELECT DISTINCT key_id FROM kms_versions WHERE wrapped_material IS NOT NULL AND destroy_at IS NOT NULL AND destroy_at <= $1 LIMIT $2`,
      [now, limit],
    );
    return found.map((r) => r.key_id);
  }

  async keysWithDueRotation(now: number, limit: number): Promise<string[]> {
    const found = await rows<{ id: string }>(
      this.pool,
      "SELECT id FROM kms_keys WHERE next_rotation_at IS NOT NULL AND next_rotation_at <= $1 AND gone_at IS NULL LIMIT $2",
      [now, limit],
    );
    return found.map((r) => r.id);
  }

  async readMasterKeyCheck(): Promise<MasterKeyCheckRecord | null> {
    const row = await first<MasterKeyRow>(this.pool, "SELECT scheme, key_id, check_value FROM kms_master_key WHERE id = 1");
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
    const row = await first<WrappedRow>(this.pool, "SELECT key_id, id, wrapped_material FROM kms_versions WHERE wrapped_material IS NOT NULL LIMIT 1");
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
  async close(): Promise<void> {}
}
