import type { Logger } from "pino";
import type { BeforeMigrations, Storage } from "../storage.js";
import { MasterKeyMismatchError } from "../../kms/master-key-check.js";
import { postgresMasterKeyReader } from "./master-key-reader.js";
import { SchemaVersionError } from "../schema-version.js";
import type { MigrationMode } from "../schema-version.js";
import { ChangeFeed } from "./change-feed.js";
import { migrate } from "./migrations.js";
import { PostgresAuditStore } from "./postgres-audit-store.js";
import { PostgresVAppStore } from "./postgres-vapp-store.js";
import { PostgresComputeStore } from "./postgres-compute-store.js";
import { PostgresIdentityStore } from "./postgres-identity-store.js";
import { PostgresKmsStore } from "./postgres-kms-store.js";
import { PostgresNodeLedger } from "./postgres-node-ledger.js";
import { createClient, createPool } from "./sql.js";

export interface PostgresSettings {
  url: string;
  poolSize: number;
  // For each statement of the pool (createPool); migrations, on a connection of their own, have none.
  queryTimeoutMs: number;
}

// The session-level advisory lock that servers starting on one database take in turn (migrations, the master key
// check, bootstrapping the admin account). Any constant works; this one spells "cloudpln".
const STARTUP_LOCK = 0x636c6f7564706c6en;

// The shared store of several servers: one connection pool for every store, a connection of its own for the
// start-up lock, and one for the change feed.
export async function openPostgresStorage(
  settings: PostgresSettings,
  logger: Logger,
  mode: MigrationMode = "upgrade",
  beforeMigrations: BeforeMigrations | null = null,
): Promise<Storage> {
  const pool = createPool(settings.url, settings.poolSize, settings.queryTimeoutMs);
  // An idle connection that breaks (the database restarted) is dropped by the pool; without a listener the error
  // would end the process.
  pool.on("error", (err) => logger.warn({ err }, "an idle PostgreSQL connection failed; the pool replaces it"));
  let feed: ChangeFeed | null = null;

  async function exclusively<T>(steps: () => Promise<T>): Promise<T> {
    const client = createClient(settings.url);
    await client.connect();
    try {
      await client.query("SELECT pg_advisory_lock($1)", [STARTUP_LOCK]);
      return await steps();
    } finally {
      // Ending the session releases the lock, also when the unlock is never sent.
      await client.end().catch(() => {});
    }
  }

  try {
    await exclusively(async () => {
      // A connection of its own, with no statement timeout: a migration of a large table may take minutes.
      const client = createClient(settings.url);
      await client.connect();
      try {
        await beforeMigrations?.(postgresMasterKeyReader(client));
        await migrate(client, mode);
      } finally {
        await client.end().catch(() => {});
      }
    });
  } catch (err) {
    await pool.end().catch(() => {});
    // Refusals that say what is wrong with the database itself.
    if (err instanceof SchemaVersionError || err instanceof MasterKeyMismatchError) throw err;
    throw new Error(`could not open the PostgreSQL database of DATABASE_URL: ${(err as Error).message}`, { cause: err });
  }

  const kms = new PostgresKmsStore(pool);
  return {
    kind: "postgres",
    kms,
    compute: new PostgresComputeStore(pool),
    vapps: new PostgresVAppStore(pool),
    ledger: new PostgresNodeLedger(pool),
    identity: new PostgresIdentityStore(pool),
    audit: new PostgresAuditStore(pool),
    exclusively,
    async watch(listener) {
      // The KMS store keeps ListCryptoKeys' page positions only while it hears of every other server's writes.
      feed = new ChangeFeed(
        settings.url,
        pool,
        {
          keyChanged: (keyId) => listener.keyChanged(keyId),
          accessChanged: () => listener.accessChanged(),
          taskStored: () => listener.taskStored(),
          taskFinished: (taskId) => listener.taskFinished(taskId),
          namespaceChanged: (parentId) => kms.namespaceChanged(parentId),
          feedLive: (live) => {
            kms.feedLive(live);
            listener.feedLive(live);
          },
        },
        logger,
      );
      await feed.start();
    },
    async close() {
      await feed?.stop();
      await pool.end();
    },
  };
}
