import type { Logger } from "pino";
import type { Call } from "../call.js";
import { callErrorOf } from "../call-error.js";
import type { CallError } from "../call-error.js";
import type { Stage } from "../stage.js";

// Turns whatever the rest of the call threw into a CallError, and writes the call's log line: faults with their
// cause at error level, every other outcome at debug level only (per call, it would cost more than the call).
export function errorsAndLogStage(logger: Logger): Stage {
  function failed(call: Call, thrown: unknown): CallError {
    const error = callErrorOf(thrown, call.entry.policy.domain, call.requestId, call.callerGone);
    if (error.internal) {
      logger.error({ requestId: call.requestId, method: call.method.name, protocol: call.protocol, err: thrown }, "call failed with an internal error");
    } else if (logger.isLevelEnabled("debug")) {
      logLine(call, error.status.code, error.message);
    }
    return error;
  }

  function logLine(call: Call, code: number, message?: string): void {
    const ms = performance.now() - call.started;
    logger.debug({ requestId: call.requestId, method: call.method.name, protocol: call.protocol, code, message, ms }, "call");
  }

  return (call, next) => {
    let outcome;
    try {
      outcome = next(call);
    } catch (thrown) {
      throw failed(call, thrown);
    }
    if (outcome instanceof Promise) {
      return outcome.then(
        (value: unknown) => {
          if (logger.isLevelEnabled("debug")) logLine(call, 0);
          return value;
        },
        (thrown: unknown) => {
          throw failed(call, thrown);
        },
      );
    }
    if (logger.isLevelEnabled("debug")) logLine(call, 0);
    return outcome;
  };
}
