import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import type { CallTallies, CallTally } from "../../metrics/call-tally.js";
import { Code } from "@connectrpc/connect";
import type { Call } from "../call.js";
import { CallError } from "../call-error.js";
import type { Stage } from "../stage.js";

// Counts every call by service, method, protocol and code, with its duration, into the tallies /metrics shows
// (src/metrics/). Outside the errors stage, so that it sees every failure as the code the caller gets; a
// RESOURCE_EXHAUSTED refusal (a rate limit, too many failed authentications) is also counted by its reason.
// Plain arithmetic on the hot path, and a synchronous outcome stays synchronous.
export function metricsStage(tallies: CallTallies): Stage {
  function failed(call: Call, tally: CallTally, thrown: unknown): void {
    const code = thrown instanceof CallError ? thrown.status.code : Code.Internal;
    tally.record(code, (performance.now() - call.started) / 1000);
    if (code !== Code.ResourceExhausted || !(thrown instanceof CallError)) return;
    const info = thrown.status.details.find((d) => d.desc === ErrorInfoSchema)?.value as { reason?: string } | undefined;
    tally.refused(info?.reason ?? "");
  }

  return (call, next) => {
    const tally = tallies.of(call.entry, call.protocol);
    let outcome;
    try {
      outcome = next(call);
    } catch (thrown) {
      failed(call, tally, thrown);
      throw thrown;
    }
    if (outcome instanceof Promise) {
      return outcome.then(
        (value: unknown) => {
          tally.record(0, (performance.now() - call.started) / 1000);
          return value;
        },
        (thrown: unknown) => {
          failed(call, tally, thrown);
          throw thrown;
        },
      );
    }
    tally.record(0, (performance.now() - call.started) / 1000);
    return outcome;
  };
}
