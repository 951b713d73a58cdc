import { Code, ConnectError } from "@connectrpc/connect";
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

// What a thrown value means for the caller. Domain errors say it themselves. A ConnectError reaches here only
// on calls Connect serves, raised by Connect around the handler (a deadline it enforced, a caller that went
// away): its code is kept, the rest is ours. Anything else is a fault of ours: the caller learns only the request
// id to quote, and the cause goes to the log (the caller of this function logs when `internal` is set).
export function callErrorOf(thrown: unknown, domain: ErrorDomain, requestId: string): CallError {
  if (thrown instanceof CallError) return thrown;
  if (thrown instanceof DomainError) return new CallError(statusPartsOf(thrown), false);
  if (thrown instanceof ConnectError) {
    if (thrown.code === Code.DeadlineExceeded) return new CallError(statusPartsOf(deadlineExceeded(domain)), false);
    // The caller went away; nobody reads this answer.
    if (thrown.code === Code.Canceled || thrown.code === Code.Aborted) return protocolCallError(domain, thrown.code, "the call was canceled");
  }
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
