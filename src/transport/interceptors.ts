import type { Interceptor } from "@connectrpc/connect";
import type { Logger } from "pino";
import { failure, logSuccess } from "./call-outcome.js";
import { requestIdKey } from "./context.js";

// Runs around every call that Connect serves (REST too, which reaches the handlers through the Connect router):
// turns whatever the handler threw into the wire error, and logs faults with their cause under the call's
// request id (given by handler-wrapper.ts, which also puts it on the response).
export function callInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    const requestId = req.contextValues.get(requestIdKey);
    const name = req.method.name;
    const started = performance.now();
    try {
      const res = await next(req);
      if (!res.stream) {
        logSuccess(logger, requestId, name, started);
        return res;
      }
      // A streaming handler fails while its messages are read, after `next` has returned.
      return { ...res, message: mapStreamErrors(res.message, logger, requestId, name, started) };
    } catch (thrown) {
      throw failure(logger, thrown, requestId, name, started);
    }
  };
}

async function* mapStreamErrors<T>(
  messages: AsyncIterable<T>,
  logger: Logger,
  requestId: string,
  name: string,
  started: number,
): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (thrown) {
    throw failure(logger, thrown, requestId, name, started);
  }
  logSuccess(logger, requestId, name, started);
}
