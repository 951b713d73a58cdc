import Database from "better-sqlite3";
import { DomainError } from "./domain-error.js";
import type { ErrorDomain } from "./reasons.js";

// Errors that say the store cannot do its work for now, not that the server is at fault: the disk is full or failing,
// the database is locked past its wait, PostgreSQL refuses, is restarting or cannot be reached. They were INTERNAL,
// "a fault in the server, quote the request id", which clients do not retry, beside the UNAVAILABLE of the audit
// trail for the same cause (two probes, a full disk and a PostgreSQL outage, 2026-11-28). Told apart by their codes,
// never by their texts.

// SQLite's primary result codes (extended codes such as SQLITE_IOERR_WRITE start with them).
const SQLITE_CODES = ["SQLITE_FULL", "SQLITE_IOERR", "SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_NOMEM"];
// PostgreSQL's SQLSTATE classes and codes: connection exceptions (08), insufficient resources (53: disk full, out of
// memory, too many connections), operator intervention (57P01-57P03: a terminated backend, a shutdown, not accepting
// connections yet; 57014: a statement cancelled, by the server's statement_timeout, DATABASE_QUERY_TIMEOUT_SECONDS,
// or by an operator), a lock not had within lock_timeout (55P03), a session ended idle in its transaction (25P03),
// and the serialization failure and deadlock a retry resolves (40001, 40P01). The cancels and timeouts were INTERNAL
// (a probe, 2026-11-28).
const PG_CLASSES = ["08", "53"];
const PG_CODES = ["57P01", "57P02", "57P03", "57014", "55P03", "25P03", "40001", "40P01"];
// Node's codes for a connection that could not be made or was lost.
const NET_CODES = ["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN"];

// What node-postgres says when it lost, could not make or gave up on its connection ("Connection terminated
// unexpectedly", "not queryable", a connect or query timeout): plain Errors with no code, told apart from the server's
// errors and from the project's own by where they were thrown, the driver's calls (storage/postgres/driver-errors.ts),
// which wrap them in this.
export class StoreConnectionError extends Error {
  constructor(cause: Error) {
    // The log line's message adds the cause's.
    super("the connection to PostgreSQL failed", { cause });
    this.name = "StoreConnectionError";
  }
}

function sqlstateOf(err: object): string | undefined {
  // node-postgres's DatabaseError: the server's answer, with its SQLSTATE and severity (the class is not imported,
  // so that a server on the embedded store never loads the driver).
  const { code, severity } = err as { code?: unknown; severity?: unknown };
  return typeof code === "string" && typeof severity === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

export function isStoreUnavailable(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  if (err instanceof StoreConnectionError) return true;
  if (err instanceof Database.SqliteError) return SQLITE_CODES.some((code) => err.code.startsWith(code));
  const sqlstate = sqlstateOf(err);
  if (sqlstate !== undefined) return PG_CLASSES.includes(sqlstate.slice(0, 2)) || PG_CODES.includes(sqlstate);
  const { code, syscall } = err as { code?: unknown; syscall?: unknown };
  return typeof code === "string" && typeof syscall === "string" && NET_CODES.includes(code);
}

// The level a failure of background work (the key sweep, the retentions, the task worker) is logged at: the store
// out for now is the operator's to see, at warn; anything else is a fault of the server's, at error, which pages.
// During a database outage those jobs logged at error, with stacks, every interval (a probe, 2026-11-28).
export function failureLevel(err: unknown): "warn" | "error" {
  return isStoreUnavailable(err) ? "warn" : "error";
}

export function storeUnavailable(domain: ErrorDomain): DomainError {
  return new DomainError({
    code: "unavailable",
    reason: "STORE_UNAVAILABLE",
    domain,
    // A COMMIT PostgreSQL carried out whose reply the lost connection never brought back leaves the change made: 2 of 6
    // creates so refused were stored (a probe, 2026-11-28), as the audit trail's refusal already said of its own.
    message: "the server's store cannot be written or reached for now (a full disk, a lost database connection); retry later, and read before retrying a change: a connection lost while it committed may have taken the change",
    retryAfterSeconds: 1,
  });
}
