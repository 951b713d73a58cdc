import pg from "pg";
import { StoreClient, StorePool } from "./driver-errors.js";

// node-postgres returns BIGINT (int8) as a string, since it may exceed 2^53. Every integer column here is a count,
// an id of a version or a time in epoch milliseconds, all far below that, and the shared row mapping (rows.ts)
// reads numbers, as SQLite gives them. Per pool, not node-postgres's global parser, so nothing else is affected.
const INT8_OID = 20;
const types = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8_OID && format !== "binary" ? (text: string) => Number(text) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

// How long opening a connection may take: with PostgreSQL unreachable in silence (a dropped route, a black-holed
// address) a start waited for ever without a word, and every call for a connection of the pool (a probe of outages,
// 2026-11-28). TCP keepalive lets the system notice a connection whose peer is gone.
const connection = { connectionTimeoutMillis: 10_000, keepAlive: true };

// A connection that breaks while it is in use (PostgreSQL restarted, the backend terminated, a reset) makes its client
// emit "error" besides failing the query in flight. pg-pool listens only while a client is idle, and an "error" with
// no listener ended the process: every busy server went down with a database restart (a probe of outages,
// 2026-11-28). The query's rejection carries the error to its caller, and pg-pool drops a broken client when it
// is released, so the event needs no more than a listener.
function survive(client: pg.ClientBase): void {
  client.on("error", () => {});
}

// How long a statement of the pool may run: PostgreSQL's own statement_timeout, DATABASE_QUERY_TIMEOUT_SECONDS. The
// server cancels a statement that runs or waits for a lock longer (SQLSTATE 57014, answered STORE_UNAVAILABLE) and
// the connection stays in the pool, usable. A timeout kept only on this side gave up on the connection while its
// backend went on waiting for the lock: every period added a pool's worth of backends, until PostgreSQL refused
// every client, "too many clients already" (a probe, 2026-11-28).
//
// A connection whose answer does not come even then has gone silent (a dropped route, a stalled proxy): those were
// kept for ever, their calls waiting, the pool dry and SIGTERM unheeded (a probe of outages, 2026-11-28). node-postgres
// fails the statement `SILENT_AFTER_MS` later (`query_timeout`) and the connection is given up (pg-pool drops a client
// released with an error: pool.query does so, and `transaction` below).
//
// PostgreSQL ends a session of ours left idle in a transaction for half the statement timeout (at least a second),
// so that a server cut off from it does not hold its locks (the advisory locks of names and capacities, rows FOR
// UPDATE) against every other server until TCP notices, hours later, and well within the time the others' own
// statements may wait for them. The server's transactions idle only while their JavaScript runs between statements.
const SILENT_AFTER_MS = 2000;

function statementBounds(statementTimeoutMs: number): { statement_timeout: number; query_timeout: number } {
  return { statement_timeout: statementTimeoutMs, query_timeout: statementTimeoutMs + SILENT_AFTER_MS };
}

export function createPool(url: string, max: number, statementTimeoutMs: number): pg.Pool {
  const pool = new StorePool({
    connectionString: url,
    max,
    types,
    ...connection,
    Client: StoreClient,
    ...statementBounds(statementTimeoutMs),
    idle_in_transaction_session_timeout: Math.max(1000, Math.floor(statementTimeoutMs / 2)),
  });
  pool.on("connect", survive);
  return pool;
}

// A statement that may run longer than the pool's (VACUUM), on a connection of the pool whose statement timeout is
// `timeoutMs` meanwhile, and which waits at most `lockTimeoutMs` for a lock (PostgreSQL's lock_timeout: SQLSTATE
// 55P03 then). A connection that fails in between is given up, not returned with the longer timeout.
// (node-postgres reads `query_timeout` of a statement's own config too, the wait on this side; its types do not say so.)
export async function runLong(pool: pg.Pool, text: string, timeoutMs: number, lockTimeoutMs: number): Promise<void> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query(`SET statement_timeout = ${Math.floor(timeoutMs)}`);
    await client.query(`SET lock_timeout = ${Math.floor(lockTimeoutMs)}`);
    const statement: pg.QueryConfig & { query_timeout: number } = { text, query_timeout: timeoutMs + SILENT_AFTER_MS };
    await client.query(statement);
    await client.query("RESET statement_timeout");
    await client.query("RESET lock_timeout");
  } catch (err) {
    broken = err as Error;
    throw err;
  } finally {
    client.release(broken);
  }
}

// A connection of its own, outside the pool (the start-up lock, migrations, the change feed), named in
// pg_stat_activity by `applicationName` when given, its statements bounded as the pool's by `statementTimeoutMs` when
// given (without, a statement waits for as long as PostgreSQL takes, or for ever on a connection gone silent).
export function createClient(url: string, options: { applicationName?: string; statementTimeoutMs?: number } = {}): pg.Client {
  const client = new pg.Client({
    connectionString: url,
    types,
    ...connection,
    ...(options.applicationName === undefined ? {} : { application_name: options.applicationName }),
    ...(options.statementTimeoutMs === undefined ? {} : statementBounds(options.statementTimeoutMs)),
  });
  survive(client);
  return client;
}

// A connection with no statement timeout, whatever the database's or the role's default (ALTER DATABASE ... SET
// statement_timeout, a common default of DBAs), for migrations, which may take minutes on a large table. The bound
// is PostgreSQL's largest (2^31 - 1 ms, about 24.8 days), sent in the connection's start-up packet, so it applies
// before the first statement: a `SET statement_timeout = 0` sent first itself ran under the database's default, and
// a default of 1 ms cancelled it (CI, 2026-11-28). The exact "none" (0) cannot be sent there: node-postgres leaves
// a zero out of the start-up packet.
export function createUnboundedClient(url: string): pg.Client {
  const client = new pg.Client({ connectionString: url, types, ...connection, statement_timeout: 2_147_483_647 });
  survive(client);
  return client;
}

// PostgreSQL's text holds no NUL character (U+0000): a statement given one fails ("invalid byte sequence for
// encoding UTF8: 0x00"), where SQLite compares it as any other character. So no row has a key with one, and a lookup
// by such a key (an id a caller sent as "x%00y" or "x\u0000y") finds nothing without asking, as on SQLite: it was
// INTERNAL on PostgreSQL. Text that is stored is checked by the domain's rules, which refuse control characters.
export function noRowHas(key: string): boolean {
  return key.includes("\u0000");
}

export type Queryable = pg.Pool | pg.ClientBase;

export async function rows<T>(db: Queryable, text: string, values: unknown[] = []): Promise<T[]> {
  return (await db.query(text, values)).rows as T[];
}

export async function first<T>(db: Queryable, text: string, values: unknown[] = []): Promise<T | null> {
  return ((await db.query(text, values)).rows[0] as T | undefined) ?? null;
}

// Whether the database has the table `name` (schemas of any age: before its migration, or an empty database).
export async function hasTable(db: Queryable, name: string): Promise<boolean> {
  return (await first<{ present: boolean }>(db, "SELECT to_regclass($1) IS NOT NULL AS present", [name]))?.present === true;
}

// INSERT of one row given as column -> value (the ...Params of rows.ts), bound by position.
export function insert(table: string, row: object, suffix = ""): { text: string; values: unknown[] } {
  const columns = Object.keys(row);
  const placeholders = columns.map((_, i) => `$${i + 1}`);
  return { text: `INSERT INTO ${table} (${columns.join(", ")}) VALUES (${placeholders.join(", ")}) ${suffix}`, values: Object.values(row) };
}

// How long the ROLLBACK of a failed transaction may take before its connection is given up instead: after the wait
// for a statement's answer ran out (a silent connection), the connection is still busy with that statement, and the
// ROLLBACK would wait behind it for another full wait.
// (node-postgres reads `query_timeout` of a statement's own config too; its types do not say so.)
const ROLLBACK: pg.QueryConfig & { query_timeout: number } = { text: "ROLLBACK", query_timeout: 1000 };

// Runs `work` in one READ COMMITTED transaction on one connection of the pool: committed when it returns, rolled
// back when it throws (the error is thrown on). A connection the ROLLBACK fails on is given up, not returned to the
// pool: it is broken, silent or still busy with a statement that timed out.
export async function transaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query("BEGIN");
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (err) {
    await client.query(ROLLBACK).catch((rollbackFailed: Error) => {
      broken = rollbackFailed;
    });
    throw err;
  } finally {
    client.release(broken);
  }
}

// The one channel every change is announced on (change-feed.ts reads it). The payload names what changed.
export const CHANGE_CHANNEL = "cloudplane_changes";

export const changeOf = {
  key: (keyId: string) => `k:${keyId}`,
  // A key was created in the namespace, or one's goneAt changed: ListCryptoKeys' page positions there move.
  namespace: (parentId: string) => `n:${parentId}`,
  access: () => "a",
  taskStored: () => "t",
  taskFinished: (taskId: string) => `f:${taskId}`,
};

// Announces a change when (and only if) the transaction of `client` commits.
export async function announce(client: Queryable, payload: string): Promise<void> {
  await client.query("SELECT pg_notify($1, $2)", [CHANGE_CHANNEL, payload]);
}

// Transaction-scoped advisory locks serialize writers of one namespace of names (key names in a KMS namespace,
// pool names in a cluster, the capacity of a cluster) without a table of their own. Two ints: the kind and a hash.
export async function lockName(client: pg.PoolClient, kind: number, name: string): Promise<void> {
  await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [kind, name]);
}

export const lockKinds = { kmsName: 1, poolName: 2, clusterCapacity: 3, vappName: 4 } as const;
