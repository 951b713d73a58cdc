import type { Interceptor } from "@connectrpc/connect";
import type { Logger } from "pino";
import { failure, logSuccess, requestIdOf } from "./call-outcome.js";
import { requestIdKey } from "./context.js";

// Runs around every call that Connect serves (REST too, which reaches the handlers through the Connect router):
// gives the call a request id, turns whatever the handler threw into the wire error, and logs faults with
// their cause.
export function callInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    const requestId = requestIdOf(req.header.get("x-request-id"));
    req.contextValues.set(requestIdKey, requestId);
    const started = performance.now();
    try {
      const res = await next(req);
      res.header.set("x-request-id", requestId);
      logSuccess(logger, requestId, req.method.name, started);
      return res;
    } catch (thrown) {
      throw failure(logger, thrown, requestId, req.method.name, started);
    }
  };
}
