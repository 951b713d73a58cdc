import type Database from "better-sqlite3";
import { checkSchemaVersions } from "../schema-version.js";
import type { MigrationMode } from "../schema-version.js";

// Schema changes in order. A migration is never edited once released; a change is a new entry.
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
        rotation_period_ms INTEGER,
        next_rotation_at INTEGER,
        default_algorithm TEXT NOT NULL,
        primary_version_id INTEGER,
        next_version_id INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        gone_at INTEGER
      ) STRICT;
      CREATE INDEX kms_keys_by_parent ON kms_keys (parent_id, created_at, id);
      CREATE INDEX kms_keys_by_name ON kms_keys (parent_id, name);
      CREATE INDEX kms_keys_by_rotation ON kms_keys (next_rotation_at) WHERE next_rotation_at IS NOT NULL;
      CREATE TABLE kms_versions (
        key_id TEXT NOT NULL REFERENCES kms_keys (id),
        id INTEGER NOT NULL,
        state TEXT NOT NULL,
        algorithm TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        destroy_at INTEGER,
        wrapped_material BLOB,
        PRIMARY KEY (key_id, id)
      ) STRICT;
      CREATE INDEX kms_versions_by_destroy_at ON kms_versions (destroy_at) WHERE wrapped_material IS NOT NULL AND destroy_at IS NOT NULL;
    `,
  },
  {
    // Node pools, their tasks, the workers that run them, and the nodes the simulated provider has placed.
    version: 2,
    sql: `
      CREATE TABLE compute_node_pools (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        service_instance_id TEXT NOT NULL,
        cluster_id TEXT NOT NULL,
        name TEXT NOT NULL,
        compute_flavor TEXT NOT NULL,
        node_count INTEGER NOT NULL,
        state TEXT NOT NULL,
        active_task_id TEXT,
        pending_name TEXT,
        created_at INTEGER NOT NULL,
        modified_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX compute_node_pools_by_name ON compute_node_pools (cluster_id, name);
      CREATE INDEX compute_node_pools_by_pending_name ON compute_node_pools (cluster_id, pending_name) WHERE pending_name IS NOT NULL;
      CREATE TABLE compute_tasks (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        command TEXT NOT NULL,
        status TEXT NOT NULL,
        service_instance_id TEXT NOT NULL,
        cluster_id TEXT NOT NULL,
        node_pool_id TEXT NOT NULL,
        change TEXT NOT NULL,
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        modified_at INTEGER NOT NULL,
        failure TEXT,
        result TEXT,
        attempts INTEGER NOT NULL,
        claimed_by TEXT
      ) STRICT;
      CREATE INDEX compute_tasks_unfinished ON compute_tasks (seq) WHERE status IN ('PENDING', 'RUNNING');
      CREATE INDEX compute_tasks_by_instance ON compute_tasks (service_instance_id, seq);
      CREATE INDEX compute_tasks_by_pool ON compute_tasks (node_pool_id, seq);
      CREATE TABLE compute_workers (
        id TEXT PRIMARY KEY,
        heartbeat_at INTEGER NOT NULL
      ) STRICT;
      CREATE TABLE compute_simulated_nodes (
        node_pool_id TEXT PRIMARY KEY,
        cluster_id TEXT NOT NULL,
        reserved INTEGER NOT NULL,
        ready INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX compute_simulated_nodes_by_cluster ON compute_simulated_nodes (cluster_id);
    `,
  },
  {
    // The check value of the master key the stored material is wrapped under (src/kms/master-key-check.ts): at
    // most one row. A store created before this migration gets it at its next start, once the configured master key
    // has been shown to unwrap a stored material.
    version: 3,
    sql: `
      CREATE TABLE kms_master_key (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        scheme TEXT NOT NULL,
        key_id TEXT NOT NULL,
        check_value BLOB NOT NULL,
        recorded_at INTEGER NOT NULL
      ) STRICT;
    `,
  },
  {
    // Who may call (service accounts, their tokens and API keys), what they may do (grants), and what they did
    // (the audit trail). Secrets are stored only as SHA-256 hashes (src/identity/secrets.ts). `generation`
    // changes with every change of access, so that a server caching grants sees an operator command's change.
    version: 4,
    sql: `
      CREATE TABLE identity_service_accounts (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        client_id TEXT NOT NULL UNIQUE,
        secret_hash BLOB NOT NULL,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
      ) STRICT;
      CREATE TABLE identity_access_tokens (
        id TEXT PRIMARY KEY,
        principal_id TEXT NOT NULL REFERENCES identity_service_accounts (id),
        secret_hash BLOB NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        revoked_at INTEGER
      ) STRICT;
      CREATE INDEX identity_access_tokens_by_expiry ON identity_access_tokens (expires_at);
      CREATE TABLE identity_api_keys (
        id TEXT PRIMARY KEY,
        principal_id TEXT NOT NULL REFERENCES identity_service_accounts (id),
        workspace_id TEXT NOT NULL,
        secret_hash BLOB NOT NULL,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
      ) STRICT;
      CREATE TABLE identity_grants (
        id TEXT PRIMARY KEY,
        principal_id TEXT NOT NULL REFERENCES identity_service_accounts (id),
        role TEXT NOT NULL,
        scope TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        UNIQUE (principal_id, role, scope)
      ) STRICT;
      CREATE TABLE identity_generation (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        generation INTEGER NOT NULL
      ) STRICT;
      INSERT INTO identity_generation (id, generation) VALUES (1, 0);
      CREATE TABLE audit_records (
        seq INTEGER PRIMARY KEY,
        at INTEGER NOT NULL,
        principal TEXT NOT NULL,
        method TEXT NOT NULL,
        protocol TEXT NOT NULL,
        scope TEXT NOT NULL,
        resource TEXT NOT NULL,
        code INTEGER NOT NULL,
        request_id TEXT NOT NULL
      ) STRICT;
      CREATE INDEX audit_records_by_time ON audit_records (at);
      CREATE INDEX audit_records_by_principal ON audit_records (principal, at);
    `,
  },
  {
    // vApps made from templates through the virtualization API, and the tasks that create them. The tasks are a
    // queue of their own, run by the same task engine as node pool tasks (workers share compute_workers).
    version: 5,
    sql: `
      CREATE TABLE vapps (
        seq INTEGER PRIMARY KEY,
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
        created_at INTEGER NOT NULL,
        modified_at INTEGER NOT NULL,
        task_id TEXT NOT NULL,
        UNIQUE (service_instance_id, name)
      ) STRICT;
      CREATE TABLE vapp_tasks (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        command TEXT NOT NULL,
        status TEXT NOT NULL,
        vapp_id TEXT NOT NULL,
        vapp_name TEXT NOT NULL,
        service_instance_id TEXT NOT NULL,
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        ended_at INTEGER,
        failure TEXT,
        attempts INTEGER NOT NULL,
        claimed_by TEXT
      ) STRICT;
      CREATE INDEX vapp_tasks_running ON vapp_tasks (seq) WHERE status = 'running';
    `,
  },
  {
    // The audit trail a batch to a row (src/storage/audit-batch.ts): a row and two index entries per record cost
    // more than twice as much to append. Records already stored become batches of one, in their order.
    version: 6,
    sql: `
      CREATE TABLE audit_batches (
        seq INTEGER PRIMARY KEY,
        first_at INTEGER NOT NULL,
        last_at INTEGER NOT NULL,
        records TEXT NOT NULL
      ) STRICT;
      CREATE INDEX audit_batches_by_time ON audit_batches (last_at);
      INSERT INTO audit_batches (first_at, last_at, records)
        SELECT at, at, json_array(json_array(at, principal, method, protocol, scope, resource, code, request_id))
        FROM audit_records ORDER BY seq;
      DROP TABLE audit_records;
    `,
  },
  {
    // Deep pages of ListCryptoKeys (page-checkpoints.ts): the key order index also holds gone_at, so that OFFSET
    // skips index entries without reading the rows, and the goneAt still to come in a namespace is one index seek.
    version: 7,
    sql: `
      DROP INDEX kms_keys_by_parent;
      CREATE INDEX kms_keys_by_parent ON kms_keys (parent_id, created_at, id, gone_at);
      CREATE INDEX kms_keys_gone_by_parent ON kms_keys (parent_id, gone_at) WHERE gone_at IS NOT NULL;
    `,
  },
  {
    // The first read of a deep page of ListCryptoKeys (sqlite-kms-store.ts, "key buckets"): each namespace's
    // (created_at, id) order cut into buckets of about 1024 keys, each row counting its keys (total) and those with no
    // goneAt (standing). Kept by triggers, so that every write counts, whatever makes it: a new key goes into the
    // bucket whose first position is the last at or before its own, and opens a new bucket when it is the last key
    // of its namespace and the last bucket is full; a key before the first bucket moves that bucket's start back.
    // A bucket's range is from its first position to the next bucket's: the key at its first position may be gone.
    // Existing keys are counted here, a single pass over the key order.
    version: 8,
    sql: `
      CREATE TABLE kms_key_buckets (
        parent_id TEXT NOT NULL,
        first_created_at INTEGER NOT NULL,
        first_id TEXT NOT NULL,
        total INTEGER NOT NULL,
        standing INTEGER NOT NULL,
        PRIMARY KEY (parent_id, first_created_at, first_id)
      ) STRICT;
      INSERT INTO kms_key_buckets (parent_id, first_created_at, first_id, total, standing)
        SELECT parent_id, max(CASE WHEN r % 1024 = 0 THEN created_at END), max(CASE WHEN r % 1024 = 0 THEN id END), count(*), sum(gone_at IS NULL)
        FROM (SELECT parent_id, created_at, id, gone_at, row_number() OVER (PARTITION BY parent_id ORDER BY created_at, id) - 1 AS r FROM kms_keys)
        GROUP BY parent_id, r / 1024;
      CREATE TRIGGER kms_keys_bucket_insert AFTER INSERT ON kms_keys BEGIN
        INSERT INTO kms_key_buckets (parent_id, first_created_at, first_id, total, standing)
          SELECT NEW.parent_id, NEW.created_at, NEW.id, 0, 0
          WHERE NOT EXISTS (SELECT 1 FROM kms_key_buckets WHERE parent_id = NEW.parent_id)
             OR ((SELECT total FROM kms_key_buckets WHERE parent_id = NEW.parent_id ORDER BY first_created_at DESC, first_id DESC LIMIT 1) >= 1024
                 AND NOT EXISTS (SELECT 1 FROM kms_keys WHERE parent_id = NEW.parent_id AND (created_at, id) > (NEW.created_at, NEW.id)));
        UPDATE kms_key_buckets SET first_created_at = NEW.created_at, first_id = NEW.id
          WHERE parent_id = NEW.parent_id
            AND (first_created_at, first_id) = (SELECT first_created_at, first_id FROM kms_key_buckets WHERE parent_id = NEW.parent_id ORDER BY first_created_at, first_id LIMIT 1)
            AND (first_created_at, first_id) > (NEW.created_at, NEW.id);
        UPDATE kms_key_buckets SET total = total + 1, standing = standing + (NEW.gone_at IS NULL)
          WHERE parent_id = NEW.parent_id
            AND (first_created_at, first_id) = (
              SELECT first_created_at, first_id FROM kms_key_buckets WHERE parent_id = NEW.parent_id AND (first_created_at, first_id) <= (NEW.created_at, NEW.id)
              ORDER BY first_created_at DESC, first_id DESC LIMIT 1);
      END;
      CREATE TRIGGER kms_keys_bucket_delete AFTER DELETE ON kms_keys BEGIN
        UPDATE kms_key_buckets SET total = total - 1, standing = standing - (OLD.gone_at IS NULL)
          WHERE parent_id = OLD.parent_id
            AND (first_created_at, first_id) = (
              SELECT first_created_at, first_id FROM kms_key_buckets WHERE parent_id = OLD.parent_id AND (first_created_at, first_id) <= (OLD.created_at, OLD.id)
              ORDER BY first_created_at DESC, first_id DESC LIMIT 1);
      END;
      CREATE TRIGGER kms_keys_bucket_gone AFTER UPDATE OF gone_at ON kms_keys WHEN (OLD.gone_at IS NULL) <> (NEW.gone_at IS NULL) BEGIN
        UPDATE kms_key_buckets SET standing = standing + (NEW.gone_at IS NULL) - (OLD.gone_at IS NULL)
          WHERE parent_id = NEW.parent_id
            AND (first_created_at, first_id) = (
              SELECT first_created_at, first_id FROM kms_key_buckets WHERE parent_id = NEW.parent_id AND (first_created_at, first_id) <= (NEW.created_at, NEW.id)
              ORDER BY first_created_at DESC, first_id DESC LIMIT 1);
      END;
      CREATE TRIGGER kms_keys_no_moves BEFORE UPDATE OF parent_id, created_at, id ON kms_keys
        WHEN (OLD.parent_id, OLD.created_at, OLD.id) <> (NEW.parent_id, NEW.created_at, NEW.id) BEGIN
        SELECT RAISE(ABORT, 'a key keeps its namespace, creation time and id');
      END;
    `,
  },
  {
    // The task retention (src/compute/tasks/task-retention.ts) deletes finished tasks by the time they finished
    // (modified_at of a node pool task, ended_at of a vApp task): these partial indexes hold only finished tasks,
    // in that order, so a sweep reads the entries it deletes and one more, not every task ever made.
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
];

// This build's schema versions.
export const SCHEMA_VERSIONS: readonly number[] = migrations.map((m) => m.version);

// Applies the migrations the store has not had (mode "upgrade", the server), each in its own transaction; refuses
// a store a newer build upgraded, and in mode "current only" (the operator commands) one not yet upgraded, changing
// nothing (schema-version.ts).
export function migrate(db: Database.Database, mode: MigrationMode): void {
  const hasTable = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").pluck().get() !== undefined;
  const applied = hasTable ? (db.prepare("SELECT version FROM schema_migrations").pluck().all() as number[]) : [];
  checkSchemaVersions(SCHEMA_VERSIONS, applied, mode);
  db.exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL) STRICT");
  const record = db.prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)");
  for (const m of migrations) {
    if (applied.includes(m.version)) continue;
    db.transaction(() => {
      db.exec(m.sql);
      record.run(m.version, Date.now());
    })();
  }
}
