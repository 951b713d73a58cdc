import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import {
  BadRequestSchema,
  ErrorInfoSchema,
  PreconditionFailureSchema,
  QuotaFailureSchema,
  ResourceInfoSchema,
  RetryInfoSchema,
} from "../../gen/google/rpc/error_details_pb.js";
import type { DomainError, DomainErrorKind } from "./domain-error.js";
import type { ErrorDomain } from "./reasons.js";

// One detail of a google.rpc.Status before packing: the shape ConnectError takes, and the shape to-status.ts packs
// into google.protobuf.Any.
export interface StatusDetail {
  desc: DescMessage;
  value: MessageInitShape<DescMessage>;
}

// Code, message and details of a google.rpc.Status. Connect's Code numbers are google.rpc.Code numbers.
export interface StatusParts {
  code: Code;
  message: string;
  details: StatusDetail[];
}

const codes: Record<Exclude<DomainErrorKind["code"], "protocol">, Code> = {
  invalid_argument: Code.InvalidArgument,
  not_found: Code.NotFound,
  already_exists: Code.AlreadyExists,
  failed_precondition: Code.FailedPrecondition,
  resource_exhausted: Code.ResourceExhausted,
  unavailable: Code.Unavailable,
  deadline_exceeded: Code.DeadlineExceeded,
  unauthenticated: Code.Unauthenticated,
  permission_denied: Code.PermissionDenied,
  unimplemented: Code.Unimplemented,
};

// The one place that decides which details a domain error carries (CONTRACT section 4). Errors of a call
// (to-connect-error.ts) and errors stored in a task (to-status.ts) are both built from this.
export function statusPartsOf(error: DomainError): StatusParts {
  const d = error.detail;
  const details: StatusDetail[] = [
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
    case "protocol":
      return { code: d.grpcCode, message: d.message, details };
    case "deadline_exceeded":
    case "unauthenticated":
    case "permission_denied":
    case "unimplemented":
      break;
  }
  return { code: codes[d.code], message: d.message, details };
}

// A fault of ours: the caller learns only that it happened and what to quote (`metadata` holds that reference, a
// request id or a task id); the cause goes to the log where the fault was caught.
export function internalStatusParts(domain: ErrorDomain, message: string, metadata: Record<string, string>): StatusParts {
  return {
    code: Code.Internal,
    message,
    details: [{ desc: ErrorInfoSchema, value: { reason: "INTERNAL", domain, metadata } }],
  };
}
