import { statSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import type { KeyRow, PoolRow, TaskRow, VersionRow } from "../../src/storage/rows.js";
import { openDatabase } from "../../src/storage/sqlite/database.js";

// Where bench/scale.ts grows its store, straight into the database while the server is stopped (the growth is not
// what is measured), and reads back counts and the size on disk.

export interface Rows {
  keys: KeyRow[];
  versions: VersionRow[];
  pools: PoolRow[];
  tasks: TaskRow[];
}

export interface ScaleStore {
  readonly name: "sqlite" | "postgres";
  // What the server needs to use this store.
  readonly env: Record<string, string>;
  insert(rows: Rows): Promise<void>;
  scalar<T>(sql: string): Promise<T>;
  bytes(): Promise<number>;
  close(): Promise<void>;
}

const keyColumns = ["id", "parent_id", "name", "description", "owner", "labels", "rotation_period_ms", "next_rotation_at", "default_algorithm", "primary_version_id", "next_version_id", "created_at", "gone_at"] as const;
const versionColumns = ["key_id", "id", "state", "algorithm", "created_at", "destroy_at", "wrapped_material"] as const;
const poolColumns = ["id", "service_instance_id", "cluster_id", "name", "compute_flavor", "node_count", "state", "active_task_id", "pending_name", "created_at", "modified_at"] as const;
const taskColumns = ["id", "command", "status", "service_instance_id", "cluster_id", "node_pool_id", "change", "created_by", "created_at", "modified_at", "failure", "result", "attempts"] as const;

export function sqliteStore(dataDir: string): ScaleStore {
  const insertSql = (table: string, columns: readonly string[]) =>
    `INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map((c) => `@${c}`).join(", ")})`;
  return {
    name: "sqlite",
    env: { DATABASE_URL: "" },
    async insert(rows) {
      const db = openDatabase(dataDir, "upgrade");
      // Only the growth runs without fsyncs: the server reopens the file with its own durable settings.
      db.pragma("synchronous = OFF");
      try {
        const statements = [
          [db.prepare(insertSql("kms_keys", keyColumns)), rows.keys],
          [db.prepare(insertSql("kms_versions", versionColumns)), rows.versions],
          [db.prepare(insertSql("compute_node_pools", poolColumns)), rows.pools],
          [db.prepare(insertSql("compute_tasks", taskColumns)), rows.tasks],
        ] as const;
        db.transaction(() => {
          for (const [statement, list] of statements) for (const row of list) statement.run(row);
        })();
      } finally {
        db.close();
      }
    },
    async scalar<T>(sql: string) {
      const db = new Database(join(dataDir, "cloudplane.db"), { readonly: true, fileMustExist: true });
      try {
        return db.prepare(sql).pluck().get() as T;
      } finally {
        db.close();
      }
    },
    async bytes() {
      let total = 0;
      for (const f of ["cloudplane.db", "cloudplane.db-wal"]) {
        try {
          total += statSync(join(dataDir, f)).size;
        } catch {
          // No WAL file after a clean close.
        }
      }
      return total;
    },
    async close() {},
  };
}

// A database of its own on the PostgreSQL server `adminUrl` names, dropped by close().
export async function postgresStore(adminUrl: string, database: string): Promise<ScaleStore> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
  // Column-wise arrays through unnest: one statement per table per batch.
  const insert = async (client: pg.PoolClient, table: string, columns: readonly string[], types: string[], list: Record<string, unknown>[]) => {
    if (list.length === 0) return;
    const arrays = columns.map((c) => list.map((r) => r[c] ?? null));
    await client.query(
      `INSERT INTO ${table} (${columns.join(", ")}) SELECT * FROM unnest(${types.map((t, i) => `$${i + 1}::${t}[]`).join(", ")})`,
      arrays,
    );
  };
  return {
    name: "postgres",
    env: { DATABASE_URL: url.toString() },
    async insert(rows) {
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        await client.query("SET LOCAL synchronous_commit = off");
        await insert(client, "kms_keys", keyColumns, ["text", "text", "text", "text", "text", "text", "bigint", "bigint", "text", "int", "int", "bigint", "bigint"], rows.keys as never);
        await insert(client, "kms_versions", versionColumns, ["text", "int", "text", "text", "bigint", "bigint", "bytea"], rows.versions as never);
        await insert(client, "compute_node_pools", poolColumns, ["text", "text", "text", "text", "text", "int", "text", "text", "text", "bigint", "bigint"], rows.pools as never);
        await insert(client, "compute_tasks", taskColumns, ["text", "text", "text", "text", "text", "text", "text", "text", "bigint", "bigint", "text", "text", "int"], rows.tasks as never);
        await client.query("COMMIT");
        // What autovacuum would do after such a growth, before the planner is asked about the new rows.
        await client.query("ANALYZE");
      } catch (err) {
        await client.query("ROLLBACK");
        throw err;
      } finally {
        client.release();
      }
    },
    async scalar<T>(sql: string) {
      const { rows } = await pool.query({ text: sql, rowMode: "array" });
      const value = (rows[0] as unknown[] | undefined)?.[0];
      return (typeof value === "string" && /^\d+$/.test(value) ? Number(value) : value) as T;
    },
    async bytes() {
      const { rows } = await pool.query("SELECT pg_database_size(current_database()) AS size");
      return Number((rows[0] as { size: string }).size);
    },
    async close() {
      await pool.end();
      const again = new pg.Client({ connectionString: adminUrl });
      await again.connect();
      await again.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await again.end();
    },
  };
}
