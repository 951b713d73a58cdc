import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
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
import { createClient, createPool, createUnboundedClient, first } from "./sql.js";

export interface PostgresSettings {
  url: string;
  poolSize: number;
  // For each statement of the pool (createPool); migrations, on a connection of their own, have none.
  queryTimeoutMs: number;
}

// The session-level advisory lock that servers starting on one database take in turn (migrations, the master key
// check, bootstrapping the admin account). Any constant works; this one spells "cloudpln".
const STARTUP_LOCK = 0x636c6f7564706c6en;

// How often a start waiting for the start-up lock says so, and who holds it.
const LOCK_NOTICE_MS = 5000;
// How often it asks for the lock again, and how long one ask may take (an answer is immediate; cloudplane-admin's
// statements may take ten minutes, its asks no longer than a server's).
const LOCK_POLL_MS = 200;
const LOCK_ASK_TIMEOUT_MS = 10_000;

// Takes the start-up lock, waiting for as long as another server or command holds it: a migration may take minutes.
// Not silently: a server that took it and was then cut off from the database holds it until PostgreSQL notices
// (TCP's keepalive, hours by default), and every other server's start and every cloudplane-admin command waited
// with no word meanwhile (a probe, 2026-11-28). Every LOCK_NOTICE_MS the wait is logged with the holder's session,
// which the operator can end with pg_terminate_backend once they know that server is gone.
//
// The lock is asked for again and again rather than waited for in one statement, and the holder read between two
// asks, all on `client`, whose statements are bounded: a start or a command on a database gone silent meanwhile
// fails with the store's error instead of waiting for an answer that never comes (a probe, 2026-11-28; the holder
// was read through the pool until then, and a read gone silent there held up the failure for the pool's timeout).
async function waitForStartupLock(client: pg.Client, logger: Logger): Promise<void> {
  const started = performance.now();
  let noticeAt = started + LOCK_NOTICE_MS;
  while ((await first<{ taken: boolean }>(client, "SELECT pg_try_advisory_lock($1) AS taken", [STARTUP_LOCK]))?.taken !== true) {
    if (performance.now() >= noticeAt) {
      noticeAt += LOCK_NOTICE_MS;
      const holder = await startupLockHolder(client);
      logger.warn(
        { waitedSeconds: Math.round((performance.now() - started) / 1000), holder },
        holder === null
          ? "waiting for the start-up lock of the database"
          : `waiting for the start-up lock of the database, held by session ${holder.pid} (${holder.client_addr ?? "local"}, ${holder.state ?? "?"} since ${holder.since ?? "?"}): if the server or command holding it is gone, end that session with SELECT pg_terminate_backend(${holder.pid})`,
      );
    }
    await sleep(LOCK_POLL_MS);
  }
}

interface LockHolder {
  pid: number;
  client_addr: string | null;
  application_name: string;
  state: string | null;
  since: string | null;
}

// The session that holds the start-up lock of this database. (Advisory locks are a database's own: the same lock of
// another database on the server, another deployment's, was named as the holder.)
function startupLockHolder(client: pg.Client): Promise<LockHolder | null> {
  return first<LockHolder>(
    client,
    `SELECT a.pid, a.client_addr::text AS client_addr, a.application_name, a.state, a.state_change::text AS since
       FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1 AND l.objid = $2 AND l.objsubid = 1
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    [Number(STARTUP_LOCK >> 32n), Number(STARTUP_LOCK & 0xffffffffn)],
  );
}

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
    const client = createClient(settings.url, { statementTimeoutMs: Math.min(settings.queryTimeoutMs, LOCK_ASK_TIMEOUT_MS) });
    await client.connect();
    try {
      await waitForStartupLock(client, logger);
      return await steps();
    } finally {
      // Ending the session releases the lock, also when the unlock is never sent.
      await client.end().catch(() => {});
    }
  }

  try {
    await exclusively(async () => {
      await beforeMigrations?.(postgresMasterKeyReader(pool));
      await migrate(pool, mode, () => createUnboundedClient(settings.url));
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
