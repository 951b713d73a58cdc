import type Database from "better-sqlite3";
import { alreadyExists } from "../../errors/domain-error.js";
import { mergeVersions } from "../../kms/model.js";
import type { Algorithm, CryptoKeyRecord, CryptoKeyVersionRecord, KeyAggregate, VersionState } from "../../kms/model.js";
import type { KeyMutation, KeyPage, KmsStore, MasterKeyCheckRecord, MasterKeyStore, WrappedMaterial } from "../kms-store.js";

interface KeyRow {
  id: string;
  parent_id: string;
  name: string;
  description: string;
  owner: string;
  labels: string;
  rotation_period_ms: number | null;
  next_rotation_at: number | null;
  default_algorithm: string;
  primary_version_id: number | null;
  next_version_id: number;
  created_at: number;
  gone_at: number | null;
}

interface VersionRow {
  key_id: string;
  id: number;
  state: string;
  algorithm: string;
  created_at: number;
  destroy_at: number | null;
  wrapped_material: Buffer | null;
}

interface MasterKeyRow {
  scheme: string;
  key_id: string;
  check_value: Buffer;
}

interface WrappedRow {
  key_id: string;
  id: number;
  wrapped_material: Buffer;
}

const wrappedFromRow = (r: WrappedRow): WrappedMaterial => ({ keyId: r.key_id, versionId: r.id, wrappedMaterial: r.wrapped_material });

// Re-wrapping reads the materials in pages, since better-sqlite3 runs no write while a read is still iterating.
const REWRAP_PAGE = 500;

function keyFromRow(r: KeyRow): CryptoKeyRecord {
  return {
    id: r.id,
    parentId: r.parent_id,
    name: r.name,
    description: r.description,
    owner: r.owner,
    labels: JSON.parse(r.labels) as string[],
    rotationPeriodMs: r.rotation_period_ms,
    nextRotationAt: r.next_rotation_at,
    defaultAlgorithm: r.default_algorithm as Algorithm,
    primaryVersionId: r.primary_version_id,
    nextVersionId: r.next_version_id,
    createdAt: r.created_at,
    goneAt: r.gone_at,
  };
}

function versionFromRow(r: VersionRow): CryptoKeyVersionRecord {
  return {
    keyId: r.key_id,
    id: r.id,
    state: r.state as VersionState,
    algorithm: r.algorithm as Algorithm,
    createdAt: r.created_at,
    destroyAt: r.destroy_at,
    wrappedMaterial: r.wrapped_material,
  };
}

function keyParams(k: CryptoKeyRecord) {
  return {
    id: k.id,
    parent_id: k.parentId,
    name: k.name,
    description: k.description,
    owner: k.owner,
    labels: JSON.stringify(k.labels),
    rotation_period_ms: k.rotationPeriodMs,
    next_rotation_at: k.nextRotationAt,
    default_algorithm: k.defaultAlgorithm,
    primary_version_id: k.primaryVersionId,
    next_version_id: k.nextVersionId,
    created_at: k.createdAt,
    gone_at: k.goneAt,
  };
}

function versionParams(v: CryptoKeyVersionRecord) {
  return {
    key_id: v.keyId,
    id: v.id,
    state: v.state,
    algorithm: v.algorithm,
    created_at: v.createdAt,
    destroy_at: v.destroyAt,
    wrapped_material: v.wrappedMaterial === null ? null : Buffer.from(v.wrappedMaterial),
  };
}

function checkParams(check: MasterKeyCheckRecord, now: number) {
  return { scheme: check.scheme, key_id: check.keyId, check_value: Buffer.from(check.checkValue), recorded_at: now };
}

// better-sqlite3 is synchronous, so each method runs to completion without interleaving; transactions make
// the multi-row writes atomic and durable before the promise resolves.
export class SqliteKmsStore implements KmsStore, MasterKeyStore {
  private readonly stmt;

  constructor(private readonly db: Database.Database) {
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
      nameHolder: db.prepare(
        `SELECT id FROM kms_keys WHERE parent_id = ? AND name = ? AND id <> ? AND (gone_at IS NULL OR gone_at > ?) LIMIT 1`,
      ),
      listKeys: db.prepare(
        `SELECT * FROM kms_keys WHERE parent_id = ? AND (gone_at IS NULL OR gone_at > ?)
         ORDER BY created_at, id LIMIT ? OFFSET ?`,
      ),
      dueDestruction: db.prepare(
        `SELECT DISTINCT key_id FROM kms_versions WHERE wrapped_material IS NOT NULL AND destroy_at IS NOT NULL
           AND destroy_at <= ? LIMIT ?`,
      ),
      dueRotation: db.prepare(
        `SELECT id FROM kms_keys WHERE next_rotation_at IS NOT NULL AND next_rotation_at <= ? AND gone_at IS NULL LIMIT ?`,
      ),
      getMasterKeyCheck: db.prepare("SELECT scheme, key_id, check_value FROM kms_master_key WHERE id = 1"),
      insertMasterKeyCheck: db.prepare(
        `INSERT INTO kms_master_key VALUES (1, @scheme, @key_id, @check_value, @recorded_at) ON CONFLICT (id) DO NOTHING`,
      ),
      replaceMasterKeyCheck: db.prepare(
        `INSERT INTO kms_master_key VALUES (1, @scheme, @key_id, @check_value, @recorded_at) ON CONFLICT (id) DO UPDATE SET
           scheme = excluded.scheme, key_id = excluded.key_id, check_value = excluded.check_value, recorded_at = excluded.recorded_at`,
      ),
      anyKey: db.prepare("SELECT 1 FROM kms_keys LIMIT 1"),
      anyWrapped: db.prepare("SELECT key_id, id, wrapped_material FROM kms_versions WHERE wrapped_material IS NOT NULL LIMIT 1"),
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

  async createKey(aggregate: KeyAggregate, now: number): Promise<void> {
    this.db.transaction(() => {
      this.assertNameFree(aggregate.key, now);
      this.stmt.insertKey.run(keyParams(aggregate.key));
      for (const v of aggregate.versions) this.stmt.upsertVersion.run(versionParams(v));
    }).immediate();
  }

  async getKey(keyId: string): Promise<KeyAggregate | null> {
    return this.readAggregate(keyId);
  }

  async listKeys(parentId: string, now: number, page: KeyPage) {
    const rows = this.stmt.listKeys.all(parentId, now, page.limit, page.offset) as KeyRow[];
    return rows.map((r) => {
      const key = keyFromRow(r);
      const primaryRow =
        key.primaryVersionId === null ? undefined : (this.stmt.getVersion.get(key.id, key.primaryVersionId) as VersionRow | undefined);
      return { key, primary: primaryRow === undefined ? null : versionFromRow(primaryRow) };
    });
  }

  async mutateKey<T>(keyId: string, now: number, decide: (current: KeyAggregate) => KeyMutation<T>) {
    return this.db
      .transaction(() => {
        const current = this.readAggregate(keyId);
        if (current === null) return null;
        const mutation = decide(current);
        if (mutation.key.name !== current.key.name) this.assertNameFree(mutation.key, now);
        this.stmt.updateKey.run(keyParams(mutation.key));
        for (const v of mutation.versions) this.stmt.upsertVersion.run(versionParams(v));
        return { aggregate: { key: mutation.key, versions: mergeVersions(current.versions, mutation.versions) }, result: mutation.result };
      })
      .immediate();
  }

  async keysWithDueDestruction(now: number, limit: number): Promise<string[]> {
    return this.stmt.dueDestruction.pluck().all(now, limit) as string[];
  }

  async keysWithDueRotation(now: number, limit: number): Promise<string[]> {
    return this.stmt.dueRotation.pluck().all(now, limit) as string[];
  }

  readMasterKeyCheck(): MasterKeyCheckRecord | null {
    const row = this.stmt.getMasterKeyCheck.get() as MasterKeyRow | undefined;
    return row === undefined ? null : { scheme: row.scheme, keyId: row.key_id, checkValue: row.check_value };
  }

  recordMasterKeyCheck(check: MasterKeyCheckRecord, now: number): void {
    this.stmt.insertMasterKeyCheck.run(checkParams(check, now));
  }

  holdsKeys(): boolean {
    return this.stmt.anyKey.get() !== undefined;
  }

  anyWrappedMaterial(): WrappedMaterial | null {
    const row = this.stmt.anyWrapped.get() as WrappedRow | undefined;
    return row === undefined ? null : wrappedFromRow(row);
  }

  countWrappedMaterial(): number {
    return this.stmt.countWrapped.pluck().get() as number;
  }

  rewrapAll(rewrap: (material: WrappedMaterial) => Uint8Array, check: MasterKeyCheckRecord, now: number): number {
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
        this.stmt.replaceMasterKeyCheck.run(checkParams(check, now));
        return done;
      })
      .immediate();
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
