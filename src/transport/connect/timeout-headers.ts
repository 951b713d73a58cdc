import { MAX_DEADLINE_MS, parseTimeout } from "../../pipeline/stages/deadline.js";

// Connect arms a timer of its own for the caller's deadline, from grpc-timeout or connect-timeout-ms
// (createHandlerContext), before any interceptor runs, and none of its options caps it: maxTimeoutMs refuses a
// longer timeout (INVALID_ARGUMENT) instead. Past 2^31-1 ms Node's timer fires after 1 ms, so Connect aborted a
// long-running call with a valid deadline of years as past its deadline at once. A timeout longer than the
// longest deadline (MAX_DEADLINE_MS, deadline.ts) is therefore rewritten to exactly that in the request's headers
// before Connect reads them; the deadline stage reads the same headers and holds the call to the same deadline as
// on the direct path. Invalid values are left for Connect to refuse.
const cappedValues = { "grpc-timeout": `${MAX_DEADLINE_MS / 1000}S`, "connect-timeout-ms": String(MAX_DEADLINE_MS) } as const;

export function capTimeoutHeaders(header: Headers): void {
  for (const name of ["grpc-timeout", "connect-timeout-ms"] as const) {
    const value = header.get(name);
    if (value === null) continue;
    const ms = parseTimeout(name, value);
    if (ms !== undefined && ms > MAX_DEADLINE_MS) header.set(name, cappedValues[name]);
  }
}
