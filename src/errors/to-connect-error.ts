import { Code, ConnectError } from "@connectrpc/connect";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import {
  BadRequestSchema,
  ErrorInfoSchema,
  PreconditionFailureSchema,
  QuotaFailureSchema,
  ResourceInfoSchema,
  RetryInfoSchema,
} from "../../gen/google/rpc/error_details_pb.js";
import { DomainError } from "./domain-error.js";
import type { DomainErrorKind } from "./domain-error.js";

type Detail = NonNullable<ConstructorParameters<typeof ConnectError>[3]>[number];

const codes: Record<DomainErrorKind["code"], Code> = {
  invalid_argument: Code.InvalidArgument,
  not_found: Code.NotFound,
  already_exists: Code.AlreadyExists,
  failed_precondition: Code.FailedPrecondition,
  resource_exhausted: Code.ResourceExhausted,
  unavailable: Code.Unavailable,
  unauthenticated: Code.Unauthenticated,
  permission_denied: Code.PermissionDenied,
  unimplemented: Code.Unimplemented,
};

// The one mapping from domain errors to wire errors. gRPC and gRPC-web then carry the details in
// grpc-status-details-bin, Connect in its error JSON, and the REST layer renders the same ConnectError as a
// google.rpc.Status body, so every protocol sees identical code, message and details.
export function domainErrorToConnectError(error: DomainError): ConnectError {
  const d = error.detail;
  const details: Detail[] = [
    { desc: ErrorInfoSchema, value: { reason: d.reason, domain: d.domain, metadata: d.metadata ?? {} } },
  ];
  switch (d.code) {
    case "invalid_argument":
      details.push({ desc: BadRequestSchema, value: { fieldViolations: d.violations } });
      break;
    case "not_found":
    case "already_exists":
      details.push({
        desc: ResourceInfoSchema,
        value: {
          resourceType: d.resource.resourceType,
          resourceName: d.resource.resourceName,
          owner: d.resource.owner ?? "",
          description: d.message,
        },
      });
      break;
    case "failed_precondition":
      details.push({ desc: PreconditionFailureSchema, value: { violations: d.violations } });
      break;
    case "resource_exhausted":
      details.push({ desc: QuotaFailureSchema, value: { violations: d.violations } });
      if (d.retryAfterSeconds !== undefined) {
        details.push({ desc: RetryInfoSchema, value: { retryDelay: durationFromMs(d.retryAfterSeconds * 1000) } });
      }
      break;
    case "unavailable":
      details.push({ desc: RetryInfoSchema, value: { retryDelay: durationFromMs(d.retryAfterSeconds * 1000) } });
      break;
    case "unauthenticated":
    case "permission_denied":
    case "unimplemented":
      break;
  }
  return new ConnectError(d.message, codes[d.code], undefined, details, error);
}

// A fault of ours: the caller learns only that it happened and which request id to quote; the cause goes to
// the log at the call site.
export function internalError(requestId: string, cause: unknown): ConnectError {
  return new ConnectError(
    `internal error; quote request id ${requestId} when reporting it`,
    Code.Internal,
    undefined,
    [{ desc: ErrorInfoSchema, value: { reason: "INTERNAL", domain: "cloudplane", metadata: { requestId } } }],
    cause,
  );
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
