import type Database from "better-sqlite3";

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
];

export function migrate(db: Database.Database): void {
  db.exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL) STRICT");
  const applied = new Set(
    db.prepare("SELECT version FROM schema_migrations").pluck().all() as number[],
  );
  const record = db.prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)");
  for (const m of migrations) {
    if (applied.has(m.version)) continue;
    db.transaction(() => {
      db.exec(m.sql);
      record.run(m.version, Date.now());
    })();
  }
}
