import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { DomainError } from "./domain-error.js";
import { internalStatusParts, protocolStatusParts, statusPartsOf } from "./status-details.js";

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

// An error raised by Connect's protocol layer itself (bad envelope, undecodable or oversized message, deadline)
// gets the ErrorInfo that every error of ours carries, and keeps Connect's message and metadata. Errors that
// already carry an ErrorInfo are ours and are returned as they are.
export function completeProtocolError(error: ConnectError): ConnectError {
  if (error.findDetails(ErrorInfoSchema).length > 0) return error;
  const code = isCallerFaultReportedAsInternal(error) ? Code.InvalidArgument : error.code;
  const { message, details } = protocolStatusParts(code, error.rawMessage);
  return new ConnectError(message, code, error.metadata, details, error);
}

// Connect reports these mistakes of the caller as INTERNAL; its message is the only sign of them. They are
// answered as INVALID_ARGUMENT, since nothing a caller sends may look like a fault of the server.
const callerFaultsConnectCallsInternal = [/^parse binary: /, /^received compressed envelope, but do not know how to decompress/];

function isCallerFaultReportedAsInternal(error: ConnectError): boolean {
  return error.code === Code.Internal && callerFaultsConnectCallsInternal.some((m) => m.test(error.rawMessage));
}

// Decides what a thrown value means on the wire.
export function toConnectError(thrown: unknown, requestId: string): { error: ConnectError; internal: boolean } {
  if (thrown instanceof DomainError) return { error: domainErrorToConnectError(thrown), internal: false };
  if (
    thrown instanceof ConnectError &&
    ((thrown.code !== Code.Internal && thrown.code !== Code.Unknown) || isCallerFaultReportedAsInternal(thrown))
  ) {
    return { error: completeProtocolError(thrown), internal: false };
  }
  return { error: internalError(requestId, thrown), internal: true };
}
