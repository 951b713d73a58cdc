import type { Logger } from "pino";
import { isStoreUnavailable } from "../../errors/store-unavailable.js";
import { LogBudget } from "../../shared/log-budget.js";
import type { Call } from "../call.js";
import { callErrorOf } from "../call-error.js";
import type { CallError } from "../call-error.js";
import type { Stage } from "../stage.js";

const MAX_STORE_NOTICES_PER_MINUTE = 10;

// Turns whatever the rest of the call threw into a CallError, and writes the call's log line: faults with their
// cause at error level, every other outcome at debug level only (per call, it would cost more than the call).
export function errorsAndLogStage(logger: Logger): Stage {
  // A store that fails (a full disk, a lost database) is the operator's to see, at warn; at most ten lines a minute,
  // since under load it fails every call.
  const storeNotices = new LogBudget(MAX_STORE_NOTICES_PER_MINUTE);
  function storeFailed(call: Call, thrown: unknown): void {
    if (!storeNotices.take()) return;
    logger.warn({ requestId: call.requestId, method: call.method.name, err: thrown }, "the store failed; the call was answered UNAVAILABLE (at most 10 such lines a minute)");
  }

  function failed(call: Call, thrown: unknown): CallError {
    const error = callErrorOf(thrown, call.entry.policy.domain, call.requestId, call.callerGone);
    if (isStoreUnavailable(thrown)) storeFailed(call, thrown);
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
