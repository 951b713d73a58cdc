import type { MethodEntry } from "../pipeline/method-table.js";
import type { Protocol } from "../pipeline/call.js";

// google.rpc.Code names by number, the values of the `code` label (grpc-prometheus writes them the same way).
export const CODE_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
] as const;

// Upper bounds (seconds) of the call duration histogram: a cache-hit Encrypt takes tens of microseconds, a
// WaitTask up to its caller's timeout.
export const DURATION_BUCKETS_S = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

// The calls of one method on one protocol, as plain numbers: what the metrics stage adds to on every call. A
// labelled prom-client child hashes its labels on every inc() and observe() (about 1 µs each here, several
// percent of a 1 KiB Encrypt), so the hot path only counts, and the registry reads these at scrape time.
export class CallTally {
  // Calls by google.rpc.Code.
  readonly codes = new Float64Array(CODE_NAMES.length);
  // Calls by duration bucket, not cumulative; the last slot is above every bound (+Inf).
  readonly buckets = new Float64Array(DURATION_BUCKETS_S.length + 1);
  seconds = 0;
  count = 0;
  // RESOURCE_EXHAUSTED refusals by the reason of their ErrorInfo (RATE_LIMIT_EXCEEDED,
  // AUTHENTICATION_RATE_LIMITED ...).
  readonly refusals = new Map<string, number>();

  constructor(
    readonly service: string,
    readonly method: string,
    readonly protocol: Protocol,
  ) {}

  record(code: number, seconds: number): void {
    this.codes[code < this.codes.length ? code : 2]! += 1;
    let i = 0;
    while (i < DURATION_BUCKETS_S.length && seconds > DURATION_BUCKETS_S[i]!) i++;
    this.buckets[i]! += 1;
    this.seconds += seconds;
    this.count += 1;
  }

  refused(reason: string): void {
    this.refusals.set(reason, (this.refusals.get(reason) ?? 0) + 1);
  }
}

// Every tally, one per method and protocol that has been called, created on its first call.
export class CallTallies {
  readonly #byEntry = new Map<MethodEntry, Partial<Record<Protocol, CallTally>>>();
  readonly #all: CallTally[] = [];

  of(entry: MethodEntry, protocol: Protocol): CallTally {
    let byProtocol = this.#byEntry.get(entry);
    if (byProtocol === undefined) {
      byProtocol = {};
      this.#byEntry.set(entry, byProtocol);
    }
    let tally = byProtocol[protocol];
    if (tally === undefined) {
      tally = new CallTally(entry.method.parent.typeName, entry.method.name, protocol);
      byProtocol[protocol] = tally;
      this.#all.push(tally);
    }
    return tally;
  }

  all(): readonly CallTally[] {
    return this.#all;
  }
}
