import { Code, ConnectError } from "@connectrpc/connect";
import { DomainError } from "./domain-error.js";
import { internalStatusParts, statusPartsOf } from "./status-details.js";

// The one mapping from domain errors to wire errors. gRPC and gRPC-web then carry the details in
// grpc-status-details-bin, Connect in its error JSON, and the REST layer renders the same ConnectError as a
// google.rpc.Status body, so every protocol sees identical code, message and details.
export function domainErrorToConnectError(error: DomainError): ConnectError {
  const { code, message, details } = statusPartsOf(error);
  return new ConnectError(message, code, undefined, details, error);
}

// A fault of ours: the caller learns only that it happened and which request id to quote; the cause goes to
// the log at the call site.
export function internalError(requestId: string, cause: unknown): ConnectError {
  const { code, message, details } = internalStatusParts(`internal error; quote request id ${requestId} when reporting it`, { requestId });
  return new ConnectError(message, code, undefined, details, cause);
}

// Decides what a thrown value means on the wire. ConnectErrors raised by the protocol layer itself (bad
// envelope, deadline, oversized message) pass through unchanged.
export function toConnectError(thrown: unknown, requestId: string): { error: ConnectError; internal: boolean } {
  if (thrown instanceof DomainError) return { error: domainErrorToConnectError(thrown), internal: false };
  if (thrown instanceof ConnectError && thrown.code !== Code.Internal && thrown.code !== Code.Unknown) {
    return { error: thrown, internal: false };
  }
  return { error: internalError(requestId, thrown), internal: true };
}
