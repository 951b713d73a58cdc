import { mkdirSync } from "node:fs";
import type Database from "better-sqlite3";
import type { Logger } from "pino";
import type { BeforeMigrations, ChangeListener, Storage, StorageOpener } from "../storage.js";
import { databasePath, lockDataDirectory, openAuditConnection, openUnmigrated, refuseOtherConnections } from "./database.js";
import { sqliteMasterKeyReader } from "./master-key-reader.js";
import { migrate } from "./migrations.js";
import { SqliteAuditStore } from "./sqlite-audit-store.js";
import { SqliteComputeStore } from "./sqlite-compute-store.js";
import { SqliteIdentityStore } from "./sqlite-identity-store.js";
import { SqliteKmsStore } from "./sqlite-kms-store.js";
import { SqliteNodeLedger } from "./sqlite-node-ledger.js";
import { SqliteVAppStore } from "./sqlite-vapp-store.js";
import { WalCheckpoints } from "./wal-checkpoints.js";

// The embedded store of one data directory. One server uses it: its own writes update its caches directly, and an
// operator command's access changes are seen through the access generation (access-watcher.ts), so there is no
// change feed. Start-up is exclusive already: the data directory belongs to one server, which holds its lock
// (lockDataDirectory) from before the database is opened until after it is closed. cloudplane-admin opens it beside
// the running server (accounts, grants, the audit trail) and takes no such lock.
export async function openSqliteStorage(
  dataDir: string,
  logger: Logger,
  opener: StorageOpener = "server",
  beforeMigrations: BeforeMigrations | null = null,
): Promise<Storage> {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const lock = opener === "server" ? lockDataDirectory(dataDir) : null;
  let db: Database.Database | null = null;
  let compute: SqliteComputeStore;
  try {
    if (opener === "server") refuseOtherConnections(dataDir);
    db = openUnmigrated(dataDir);
    await beforeMigrations?.(sqliteMasterKeyReader(db));
    migrate(db, opener === "server" ? "upgrade" : "current only");
    // The data directory's lock proves that no other server runs on this store: every task worker's row is a dead
    // server's, whose unfinished tasks are taken over at once rather than once its last heartbeat looks stale by
    // the clock. A server killed while its clock was an hour ahead, restarted once the clock was set right, left its
    // task RUNNING for that hour (a probe of the clock, 2026-11-28).
    compute = new SqliteComputeStore(db);
    if (opener === "server") compute.retireEveryWorker();
  } catch (err) {
    db?.close();
    lock?.close();
    throw err;
  }
  // The audit trail writes through a connection of its own (sqlite-audit-store.ts says why).
  const auditDb = openAuditConnection(dataDir);
  const checkpoints = new WalCheckpoints(databasePath(dataDir), [db, auditDb], logger);
  return {
    kind: "sqlite",
    kms: new SqliteKmsStore(db),
    compute,
    vapps: new SqliteVAppStore(db),
    ledger: new SqliteNodeLedger(db),
    identity: new SqliteIdentityStore(db),
    audit: new SqliteAuditStore(auditDb),
    exclusively: (steps) => steps(),
    watch: async (_listener: ChangeListener) => {},
    async close() {
      await checkpoints.close();
      auditDb.close();
      db.close();
      lock?.close();
    },
  };
}
