import type pg from "pg";
import { checkSchemaVersions } from "../schema-version.js";
import type { MigrationMode } from "../schema-version.js";
import { hasTable, rows } from "./sql.js";
import type { Queryable } from "./sql.js";

// The PostgreSQL schema: the same tables, columns and versions as the embedded store's (sqlite/migrations.ts), so
// that both share their row mapping (rows.ts). Times are BIGINT epoch milliseconds, blobs BYTEA, small documents
// JSON text. A migration is never edited once released; a change is a new entry, in both lists.
const migrations: { version: number; sql: string }[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE kms_keys (
        id TEXT PRIMARY KEY,
        parent_id TEXT NOT NULL,
        name TEXT NOT NULL,
        description TEXT NOT NULL,
        owner TEXT NOT NULL,
        labels TEXT NOT NULL,
        rotation_period_ms BIGINT,
        next_rotation_at BIGINT,
        default_algorithm TEXT NOT NULL,
        primary_version_id INTEGER,
        next_version_id INTEGER NOT NULL,
        created_at BIGINT NOT NULL,
        gone_at BIGINT
      );
      CREATE INDEX kms_keys_by_parent ON kms_keys (parent_id, created_at, id);
      CREATE INDEX kms_keys_by_name ON kms_keys (parent_id, name);
      CREATE INDEX kms_keys_by_rotation ON kms_keys (next_rotation_at) WHERE next_rotation_at IS NOT NULL;
      CREATE TABLE kms_versions (
        key_id TEXT NOT NULL REFERENCES kms_keys (id),
        id INTEGER NOT NULL,
        state TEXT NOT NULL,
        algorithm TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        destroy_at BIGINT,
        wrapped_material BYTEA,
        PRIMARY KEY (key_id, id)
      );
      CREATE INDEX kms_versions_by_destroy_at ON kms_versions (destroy_at) WHERE wrapped_material IS NOT NULL AND destroy_at IS NOT NULL;
    `,
  },
  {
    version: 2,
    sql: `
      CREATE TABLE compute_node_pools (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        service_instance_id TEXT NOT NULL,
        cluster_id TEXT NOT NULL,
        name TEXT NOT NULL,
        compute_flavor TEXT NOT NULL,
        node_count INTEGER NOT NULL,
        state TEXT NOT NULL,
        active_task_id TEXT,
        pending_name TEXT,
        created_at BIGINT NOT NULL,
        modified_at BIGINT NOT NULL
      );
      CREATE INDEX compute_node_pools_by_name ON compute_node_pools (cluster_id, name);
      CREATE INDEX compute_node_pools_by_pending_name ON compute_node_pools (cluster_id, pending_name) WHERE pending_name IS NOT NULL;
      CREATE TABLE compute_tasks (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        command TEXT NOT NULL,
        status TEXT NOT NULL,
        service_instance_id TEXT NOT NULL,
        cluster_id TEXT NOT NULL,
        node_pool_id TEXT NOT NULL,
        change TEXT NOT NULL,
        created_by TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        modified_at BIGINT NOT NULL,
        failure TEXT,
        result TEXT,
        attempts INTEGER NOT NULL,
        claimed_by TEXT
      );
      CREATE INDEX compute_tasks_unfinished ON compute_tasks (seq) WHERE status IN ('PENDING', 'RUNNING');
      CREATE INDEX compute_tasks_by_instance ON compute_tasks (service_instance_id, seq);
      CREATE INDEX compute_tasks_by_pool ON compute_tasks (node_pool_id, seq);
      CREATE TABLE compute_workers (
        id TEXT PRIMARY KEY,
        heartbeat_at BIGINT NOT NULL
      );
      CREATE TABLE compute_simulated_nodes (
        node_pool_id TEXT PRIMARY KEY,
        cluster_id TEXT NOT NULL,
        reserved INTEGER NOT NULL,
        ready INTEGER NOT NULL
      );
      CREATE INDEX compute_simulated_nodes_by_cluster ON compute_simulated_nodes (cluster_id);
    `,
  },
  {
    version: 3,
    sql: `
      CREATE TABLE kms_master_key (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        scheme TEXT NOT NULL,
        key_id TEXT NOT NULL,
        check_value BYTEA NOT NULL,
        recorded_at BIGINT NOT NULL
      );
    `,
  },
  {
    version: 4,
    sql: `
      CREATE TABLE identity_service_accounts (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        client_id TEXT NOT NULL UNIQUE,
        secret_hash BYTEA NOT NULL,
        created_at BIGINT NOT NULL,
        revoked_at BIGINT
      );
      CREATE TABLE identity_access_tokens (
        id TEXT PRIMARY KEY,
        principal_id TEXT NOT NULL REFERENCES identity_service_accounts (id),
        secret_hash BYTEA NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        revoked_at BIGINT
      );
      CREATE INDEX identity_access_tokens_by_expiry ON identity_access_tokens (expires_at);
      CREATE TABLE identity_api_keys (
        id TEXT PRIMARY KEY,
        principal_id TEXT NOT NULL REFERENCES identity_service_accounts (id),
        workspace_id TEXT NOT NULL,
        secret_hash BYTEA NOT NULL,
        created_at BIGINT NOT NULL,
        revoked_at BIGINT
      );
      CREATE TABLE identity_grants (
        id TEXT PRIMARY KEY,
        principal_id TEXT NOT NULL REFERENCES identity_service_accounts (id),
        role TEXT NOT NULL,
        scope TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (principal_id, role, scope)
      );
      CREATE TABLE identity_generation (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        generation BIGINT NOT NULL
      );
      INSERT INTO identity_generation (id, generation) VALUES (1, 0);
      CREATE TABLE audit_records (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        at BIGINT NOT NULL,
        principal TEXT NOT NULL,
        method TEXT NOT NULL,
        protocol TEXT NOT NULL,
        scope TEXT NOT NULL,
        resource TEXT NOT NULL,
        code INTEGER NOT NULL,
        request_id TEXT NOT NULL
      );
      CREATE INDEX audit_records_by_time ON audit_records (at);
      CREATE INDEX audit_records_by_principal ON audit_records (principal, at);
    `,
  },
  {
    // vApps made from templates through the virtualization API, and the tasks that create them.
    version: 5,
    sql: `
      CREATE TABLE vapps (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        description TEXT NOT NULL,
        service_instance_id TEXT NOT NULL,
        template_id TEXT NOT NULL,
        network_name TEXT NOT NULL,
        deploy INTEGER NOT NULL,
        power_on INTEGER NOT NULL,
        status INTEGER NOT NULL,
        deployed INTEGER NOT NULL,
        created_by TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        modified_at BIGINT NOT NULL,
        task_id TEXT NOT NULL,
        UNIQUE (service_instance_id, name)
      );
      CREATE TABLE vapp_tasks (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        command TEXT NOT NULL,
        status TEXT NOT NULL,
        vapp_id TEXT NOT NULL,
        vapp_name TEXT NOT NULL,
        service_instance_id TEXT NOT NULL,
        created_by TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        ended_at BIGINT,
        failure TEXT,
        attempts INTEGER NOT NULL,
        claimed_by TEXT
      );
      CREATE INDEX vapp_tasks_running ON vapp_tasks (seq) WHERE status = 'running';
    `,
  },
  {
    // The audit trail a batch to a row, as on the embedded store (src/storage/audit-batch.ts).
    version: 6,
    sql: `
      CREATE TABLE audit_batches (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        first_at BIGINT NOT NULL,
        last_at BIGINT NOT NULL,
        records TEXT NOT NULL
      );
      CREATE INDEX audit_batches_by_time ON audit_batches (last_at);
      INSERT INTO audit_batches (first_at, last_at, records)
        SELECT at, at, json_build_array(json_build_array(at, principal, method, protocol, scope, resource, code, request_id))::text
        FROM audit_records ORDER BY seq;
      DROP TABLE audit_records;
    `,
  },
  {
    // Deep pages of ListCryptoKeys: the key order index also holds gone_at, as on the embedded store (its migration
    // 7), so that the page's OFFSET skips index entries, not rows (postgres-kms-store.ts, listKeys).
    version: 7,
    sql: `
      DROP INDEX kms_keys_by_parent;
      CREATE INDEX kms_keys_by_parent ON kms_keys (parent_id, created_at, id, gone_at);
    `,
  },
  {
    // The earliest goneAt still to come in a namespace, read with every page of ListCryptoKeys: it bounds how long
    // the page positions recorded from it stay exact (page-checkpoints.ts). As on the embedded store.
    version: 8,
    sql: `
      CREATE INDEX kms_keys_gone_by_parent ON kms_keys (parent_id, gone_at) WHERE gone_at IS NOT NULL;
    `,
  },
  {
    // Finished tasks by the time they finished, for the task retention, as on the embedded store (its migration 9).
    version: 9,
    sql: `
      CREATE INDEX compute_tasks_finished ON compute_tasks (modified_at) WHERE status IN ('SUCCEEDED', 'FAILED');
      CREATE INDEX vapp_tasks_finished ON vapp_tasks (ended_at) WHERE status IN ('success', 'error');
    `,
  },
  {
    // A next rotation time past google.protobuf.Timestamp's last millisecond, 9999-12-31T23:59:59.999Z, which servers
    // before 2026-11-27 stored (9999-12-31T23:59:59.9995Z rounded up, or gRPC seconds past the maximum): it made the
    // key and every list of its namespace fail to be written as JSON. Such a key rotates at that last millisecond.
    version: 10,
    sql: `
      UPDATE kms_keys SET next_rotation_at = 253402300799999 WHERE next_rotation_at > 253402300799999;
    `,
  },
  {
    // The audit trail is read in the order of its batches' earliest records (postgres-audit-store.ts): the servers
    // sharing the database store their batches in an order that is not the order of their times.
    version: 11,
    sql: `
      CREATE INDEX audit_batches_by_first ON audit_batches (first_at, seq);
    `,
  },
];

// This build's schema versions (the embedded store's list mirrors them but for what docs/storage.md says differs).
export const SCHEMA_VERSIONS: readonly number[] = migrations.map((m) => m.version);

// Runs the migrations not yet applied, each in its own transaction (mode "upgrade", a server); refuses a database a
// newer build upgraded, and in mode "current only" (the operator commands) one not yet upgraded, changing nothing
// (schema-version.ts). The caller holds the start-up advisory lock (postgres-storage.ts), so servers starting at
// once migrate one after another and the later ones find nothing to do. Which were applied is read through `db` (the
// pool, whose statements are bounded: a command or a start on a database gone silent fails instead of waiting for
// ever, a probe of 2026-11-28); the missing ones run on a connection of their own from `unbounded`, with no timeout,
// since a migration of a large table may take minutes.
export async function migrate(db: Queryable, mode: MigrationMode, unbounded: () => pg.Client): Promise<void> {
  const applied = (await hasTable(db, "schema_migrations")) ? (await rows<{ version: number }>(db, "SELECT version FROM schema_migrations")).map((r) => r.version) : [];
  checkSchemaVersions(SCHEMA_VERSIONS, applied, mode);
  const missing = migrations.filter((m) => !applied.includes(m.version));
  if (missing.length === 0) return;
  const client = unbounded();
  await client.connect();
  try {
    await client.query("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)");
    for (const m of missing) {
      await client.query("BEGIN");
      try {
        await client.query(m.sql);
        await client.query("INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)", [m.version, Date.now()]);
        await client.query("COMMIT");
      } catch (err) {
        await client.query("ROLLBACK").catch(() => {});
        throw new Error(`migration ${m.version} of the schema failed, and was rolled back: ${(err as Error).message}`, { cause: err });
      }
    }
  } finally {
    await client.end().catch(() => {});
  }
}
