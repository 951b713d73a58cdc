import { deadlineExceeded, invalidTimeout } from "../../errors/protocol-errors.js";
import type { TimeoutHeader } from "../../errors/protocol-errors.js";
import type { HeaderSource } from "../call.js";
import type { Stage } from "../stage.js";

// The longest deadline a call is held to: Node's timers hold at most 2^31-1 ms (24.8 days), and a longer delay
// fires after 1 ms (TimeoutOverflowWarning), which cut a long-running call with a valid deadline of years at once.
// In whole seconds, so that both headers can say it exactly: a longer deadline is this one on every path,
// including the calls Connect serves, whose headers are capped to it before Connect arms its own timer
// (src/transport/connect/timeout-headers.ts).
export const MAX_DEADLINE_MS = 2_147_483_000;

// The call's deadline: the caller's (grpc-timeout on gRPC and gRPC-web, connect-timeout-ms on Connect; REST
// callers may send either), never later than the server's maximum (maxCallMs, MAX_CALL_SECONDS), which methods
// that wait by design (their policy says long_running) do not have: they are held to their caller's deadline
// alone, and have none when the caller sets none. No deadline is later than MAX_DEADLINE_MS. A handler still
// running at the deadline is answered DEADLINE_EXCEEDED and its signal aborted. A synchronous handler (a
// cache-hit Encrypt) has finished before any timer could fire, so it gets none. A timeout that is not of its
// header's form is refused (invalidTimeout); the gRPC adapter and Connect refuse one in their protocol's own header
// before the request is read, so this refuses the others (a REST caller's, grpc-timeout on a Connect call).
export function deadlineStage(maxCallMs: number): Stage {
  const timers = new LazyTimers();
  return (call, next) => {
    const requested = callerTimeout(call.headers);
    const { policy } = call.entry;
    if (requested !== undefined && requested.ms === undefined) throw invalidTimeout(policy.domain, requested.header);
    const timeoutMs = deadlineMs(requested?.ms, maxCallMs, policy.longRunning);
    if (timeoutMs === undefined) return next(call);
    const deadline = call.started + timeoutMs;
    // Also when it passed while the request's body was still arriving (the call started with its headers): the
    // handler does not run at all.
    if (timeoutMs <= 0 || deadline <= performance.now()) throw deadlineExceeded(policy.domain);
    call.deadline = deadline;
    const outcome = next(call);
    if (!(outcome instanceof Promise)) return outcome;
    return new Promise((resolve, reject) => {
      const watched = timers.watch(deadline, () => {
        call.abort();
        reject(deadlineExceeded(policy.domain));
      });
      outcome.then(
        (value: unknown) => {
          if (timers.settle(watched)) resolve(value);
        },
        (thrown: unknown) => {
          if (timers.settle(watched)) reject(thrown);
        },
      );
    });
  };
}

interface Watched {
  readonly deadline: number;
  readonly expire: () => void;
  settled: boolean;
  timer: NodeJS.Timeout | null;
}

// The deadline timers of calls that went asynchronous, armed only for the calls still running once the turn of the
// event loop they started in is over: by one shared timer, which runs in the next turn's timers phase, after this
// turn's setImmediate callbacks. Most asynchronous calls end within their turn (an Encrypt waits only for its
// audit batch, stored by a setImmediate of the same turn, or for a rate-limit count in memory), and a Node timer set
// and cleared for each of them cost about 1% of the call (bench/README.md). A deadline is kept to within a
// millisecond or a turn of the loop, whichever is longer.
class LazyTimers {
  private young: Watched[] = [];

  watch(deadline: number, expire: () => void): Watched {
    const watched: Watched = { deadline, expire, settled: false, timer: null };
    if (this.young.push(watched) === 1) setTimeout(() => this.arm(), 0);
    return watched;
  }

  // Whether the call is still to be answered by its own outcome (false: its deadline answered it already).
  settle(watched: Watched): boolean {
    if (watched.settled) return false;
    watched.settled = true;
    if (watched.timer !== null) clearTimeout(watched.timer);
    return true;
  }

  private arm(): void {
    const young = this.young;
    this.young = [];
    const now = performance.now();
    for (const watched of young) {
      if (watched.settled) continue;
      watched.timer = setTimeout(() => {
        if (watched.settled) return;
        watched.settled = true;
        watched.expire();
      }, Math.max(0, watched.deadline - now));
    }
  }
}

// How long a call may run, from the caller's timeout (undefined: none sent); undefined: no deadline at all.
export function deadlineMs(requestedMs: number | undefined, maxCallMs: number, longRunning: boolean): number | undefined {
  const timeoutMs = longRunning ? requestedMs : Math.min(requestedMs ?? maxCallMs, maxCallMs);
  return timeoutMs === undefined ? undefined : Math.min(timeoutMs, MAX_DEADLINE_MS);
}

// gRPC's "TimeoutValue TimeoutUnit": at most 8 digits and one of H M S m u n (PROTOCOL-HTTP2.md).
const GRPC_TIMEOUT = /^(\d{1,8})([HMSmun])$/;
const unitMs: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };
// Connect: at most 10 digits of milliseconds.
const CONNECT_TIMEOUT = /^\d{1,10}$/;

// The timeout a header's value says, in ms; undefined when the value is not of the header's form.
export function parseTimeout(header: TimeoutHeader, value: string): number | undefined {
  if (header === "connect-timeout-ms") return CONNECT_TIMEOUT.test(value) ? Number(value) : undefined;
  const m = GRPC_TIMEOUT.exec(value);
  return m === null ? undefined : Number(m[1]) * unitMs[m[2]!]!;
}

// The caller's timeout: grpc-timeout when sent, else connect-timeout-ms, whatever the protocol; `ms` undefined
// when the value is not valid. Undefined when the caller sent neither.
export function callerTimeout(headers: HeaderSource): { header: TimeoutHeader; ms: number | undefined } | undefined {
  for (const header of ["grpc-timeout", "connect-timeout-ms"] as const) {
    const value = headers.get(header);
    if (value !== null && value !== undefined) return { header, ms: parseTimeout(header, value) };
  }
  return undefined;
}
