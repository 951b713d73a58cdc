import { randomUUID } from "node:crypto";
import type { ConnectError } from "@connectrpc/connect";
import type { Logger } from "pino";
import { toConnectError } from "../errors/to-connect-error.js";

// What every call does at its start and end, whichever path served it: the Connect interceptor and the gRPC
// fast path both use these, so request ids, error mapping and logging cannot drift apart.

// A caller-supplied id is kept when it is short and plain, so logs of both sides line up; anything else is
// replaced rather than echoed into our logs.
const CALLER_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function requestIdOf(given: string | null | undefined): string {
  return given !== null && given !== undefined && CALLER_REQUEST_ID.test(given) ? given : randomUUID();
}

// Per call, only at debug level.
export function logSuccess(logger: Logger, requestId: string, method: string, started: number): void {
  if (logger.isLevelEnabled("debug")) {
    logger.debug({ requestId, method, code: "ok", ms: performance.now() - started }, "call");
  }
}

// Turns whatever a handler threw into the wire error; faults are logged with their cause, the rest at debug.
export function failure(logger: Logger, thrown: unknown, requestId: string, method: string, started: number): ConnectError {
  const { error, internal } = toConnectError(thrown, requestId);
  if (internal) {
    logger.error({ requestId, method, err: thrown }, "call failed with an internal error");
  } else if (logger.isLevelEnabled("debug")) {
    logger.debug({ requestId, method, code: error.code, message: error.rawMessage, ms: performance.now() - started }, "call");
  }
  error.metadata.set("x-request-id", requestId);
  return error;
}
