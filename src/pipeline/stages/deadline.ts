import { Code } from "@connectrpc/connect";
import { deadlineExceeded } from "../../errors/protocol-errors.js";
import type { HeaderSource } from "../call.js";
import { protocolCallError } from "../call-error.js";
import type { Stage } from "../stage.js";

// The call's deadline: the caller's (grpc-timeout on gRPC and gRPC-web, connect-timeout-ms on Connect; REST
// callers may send either), never later than the server's maximum, which methods that wait by design (their
// policy says long_running) do not have. A handler still running at the deadline is answered DEADLINE_EXCEEDED
// and its signal aborted. A synchronous handler (a cache-hit Encrypt) has finished before any timer could fire,
// so it gets none.
export function deadlineStage(maxCallMs: number): Stage {
  return (call, next) => {
    const requested = callerTimeoutMs(call.headers);
    const { policy } = call.entry;
    if (requested === "invalid") throw protocolCallError(policy.domain, Code.InvalidArgument, "the grpc-timeout or connect-timeout-ms header is not a valid timeout");
    const timeoutMs = policy.longRunning ? requested : Math.min(requested ?? maxCallMs, maxCallMs);
    if (timeoutMs === undefined) return next(call);
    if (timeoutMs <= 0) throw deadlineExceeded(policy.domain);
    call.deadline = call.started + timeoutMs;
    const outcome = next(call);
    if (!(outcome instanceof Promise)) return outcome;
    const remainingMs = Math.max(0, call.deadline - performance.now());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        call.abort();
        reject(deadlineExceeded(policy.domain));
      }, remainingMs);
      outcome.then(
        (value: unknown) => {
          clearTimeout(timer);
          resolve(value);
        },
        (thrown: unknown) => {
          clearTimeout(timer);
          reject(thrown);
        },
      );
    });
  };
}

// gRPC's "TimeoutValue TimeoutUnit": at most 8 digits and one of H M S m u n (PROTOCOL-HTTP2.md).
const GRPC_TIMEOUT = /^(\d{1,8})([HMSmun])$/;
const unitMs: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };
// Connect: at most 10 digits of milliseconds.
const CONNECT_TIMEOUT = /^\d{1,10}$/;

export function callerTimeoutMs(headers: HeaderSource): number | undefined | "invalid" {
  const grpc = headers.get("grpc-timeout");
  if (grpc !== null && grpc !== undefined) {
    const m = GRPC_TIMEOUT.exec(grpc);
    return m === null ? "invalid" : Number(m[1]) * unitMs[m[2]!]!;
  }
  const connect = headers.get("connect-timeout-ms");
  if (connect !== null && connect !== undefined) return CONNECT_TIMEOUT.test(connect) ? Number(connect) : "invalid";
  return undefined;
}
