import pg from "pg";
import { StoreConnectionError } from "../../errors/store-unavailable.js";

// node-postgres reports a connection it lost, could not make or gave up on with plain Errors that carry no code
// ("Connection terminated unexpectedly", "Client has encountered a connection error and is not queryable", "Query read
// timeout", pg-pool's "timeout exceeded when trying to connect"). Those answered INTERNAL, "a fault in the server",
// where the server's own refusals for the same outage answered UNAVAILABLE (a probe of outages, 2026-11-28). Their
// texts are not a contract, so they are told apart by where they come from: a plain Error out of the driver's own
// calls, wrapped here, at the pool's and the connections' `query`, the only doors to the database. The server's
// answers (DatabaseError, with a SQLSTATE), socket errors (with a code) and programming errors (TypeError, say, for a
// value that cannot be sent) are other classes and pass unchanged.
export function fromDriver(err: unknown): unknown {
  return err instanceof Error && err.constructor === Error && (err as { code?: unknown }).code === undefined ? new StoreConnectionError(err) : err;
}

function rethrow(err: unknown): never {
  throw fromDriver(err);
}

// The callback form is pg-pool's own, for the statement of a pool.query; the pool's promise wraps what it reports.
function wrapped(result: unknown): unknown {
  return result instanceof Promise ? result.catch(rethrow) : result;
}

type AnyQuery = (...args: unknown[]) => unknown;

// The connections of the pool (PoolConfig.Client): the statements of a transaction.
export class StoreClient extends pg.Client {
  override query(...args: unknown[]): never {
    return wrapped((super.query as AnyQuery).apply(this, args)) as never;
  }
}

// The pool: statements outside a transaction, and taking a connection for one.
export class StorePool extends pg.Pool {
  override query(...args: unknown[]): never {
    return wrapped((super.query as AnyQuery).apply(this, args)) as never;
  }

  override connect(...args: unknown[]): never {
    return wrapped((super.connect as AnyQuery).apply(this, args)) as never;
  }
}
