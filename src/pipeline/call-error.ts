import { Code, ConnectError } from "@connectrpc/connect";
import { isStoreUnavailable, storeUnavailable } from "../errors/store-unavailable.js";
import { DomainError } from "../errors/domain-error.js";
import { deadlineExceeded, protocolError } from "../errors/protocol-errors.js";
import { internalStatusParts, statusPartsOf } from "../errors/status-details.js";
import type { StatusParts } from "../errors/status-details.js";
import type { ErrorDomain } from "../errors/reasons.js";

// A failed call as protocol-neutral data: the parts of its google.rpc.Status. The pipeline throws nothing else;
// each adapter renders it for its protocol (gRPC trailers, Connect's error JSON, a REST body).
export class CallError extends Error {
  constructor(
    readonly status: StatusParts,
    // A fault of the server rather than of the request.
    readonly internal: boolean,
  ) {
    super(status.message);
    this.name = "CallError";
  }
}

// What connect-node answers a caller's breach of its protocol with; never INTERNAL, UNKNOWN or DATA_LOSS, which are
// faults of the server.
const CALLER_CODES: ReadonlySet<Code> = new Set([Code.InvalidArgument, Code.Unimplemented, Code.ResourceExhausted, Code.FailedPrecondition, Code.OutOfRange]);

// What a thrown value means for the caller. Domain errors say it themselves. A ConnectError reaches here only
// on calls Connect serves, raised by Connect around the handler (a deadline it enforced, a caller that went away, a
// streaming request that breaks its protocol): its code is kept, the rest is ours. Anything else is a fault of
// ours: the caller learns only the request id to quote, and the cause goes to the log (the caller of this function
// logs when `internal` is set).
// `callerGone`: the call's caller has gone away (Call.callerGone), which makes whatever else failed its CANCELED.
export function callErrorOf(thrown: unknown, domain: ErrorDomain, requestId: string, callerGone = false): CallError {
  if (thrown instanceof CallError) return thrown;
  if (thrown instanceof DomainError) return new CallError(statusPartsOf(thrown), false);
  if (isStoreUnavailable(thrown)) return new CallError(statusPartsOf(storeUnavailable(domain)), false);
  if (thrown instanceof ConnectError) {
    if (thrown.code === Code.DeadlineExceeded) return new CallError(statusPartsOf(deadlineExceeded(domain)), false);
    // The caller went away; nobody reads this answer.
    if (thrown.code === Code.Canceled || thrown.code === Code.Aborted) return protocolCallError(domain, thrown.code, "the call was canceled");
    // connect-node reads a streaming call's input inside the call, and refuses there what breaks its protocol with the
    // code the protocol gives it: a health Watch sent with no message is UNIMPLEMENTED "missing input message". Our
    // own code throws DomainErrors, so a ConnectError with a code a caller can earn is the caller's, answered with
    // that code; it was INTERNAL, with an error line and its stack for each (a probe: 1 MB of log a second, from an
    // anonymous client, 2026-11-28).
    if (CALLER_CODES.has(thrown.code)) return protocolCallError(domain, thrown.code, thrown.rawMessage);
  }
  // A streaming call's caller that left mid-stream makes connect-node's reading of its input fail with Node's
  // premature-close error: no fault of the server, and nobody reads the answer. It was INTERNAL, an error line with
  // its stack and an INTERNAL count each time, at the will of an unauthenticated client (a probe, 2026-11-28).
  if (callerGone) return protocolCallError(domain, Code.Canceled, "the call was canceled");
  return internalCallError(domain, requestId);
}

export function internalCallError(domain: ErrorDomain, requestId: string): CallError {
  const message = `internal error; quote request id ${requestId} when reporting it`;
  return new CallError(internalStatusParts(domain, message, { requestId }), true);
}

// A rule of the protocol broken, with the code that says which kind (protocol-errors.ts).
export function protocolCallError(domain: ErrorDomain, code: Code, message: string): CallError {
  return new CallError(statusPartsOf(protocolError(domain, code, message)), false);
}
