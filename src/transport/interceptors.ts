import { randomUUID } from "node:crypto";
import type { Interceptor } from "@connectrpc/connect";
import type { Logger } from "pino";
import { toConnectError } from "../errors/to-connect-error.js";
import { requestIdKey } from "./context.js";

// A caller-supplied id is kept when it is short and plain, so logs of both sides line up; anything else is
// replaced rather than echoed into our logs.
const CALLER_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

// Runs around every call of every protocol (REST too, which reaches the handlers through the Connect router):
// gives the call a request id, turns whatever the handler threw into the wire error, and logs faults with
// their cause. Per call it logs only at debug level.
export function callInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    const given = req.header.get("x-request-id");
    const requestId = given !== null && CALLER_REQUEST_ID.test(given) ? given : randomUUID();
    req.contextValues.set(requestIdKey, requestId);
    const started = performance.now();
    try {
      const res = await next(req);
      res.header.set("x-request-id", requestId);
      if (logger.isLevelEnabled("debug")) {
        logger.debug({ requestId, method: req.method.name, code: "ok", ms: performance.now() - started }, "call");
      }
      return res;
    } catch (thrown) {
      const { error, internal } = toConnectError(thrown, requestId);
      if (internal) {
        logger.error({ requestId, method: req.method.name, err: thrown }, "call failed with an internal error");
      } else if (logger.isLevelEnabled("debug")) {
        logger.debug({ requestId, method: req.method.name, code: error.code, message: error.rawMessage, ms: performance.now() - started }, "call");
      }
      error.metadata.set("x-request-id", requestId);
      throw error;
    }
  };
}
