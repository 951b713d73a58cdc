import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import type { Status } from "../../gen/google/rpc/status_pb.js";
import type { DomainError } from "./domain-error.js";
import type { ErrorDomain } from "./reasons.js";
import { internalStatusParts, statusPartsOf } from "./status-details.js";
import type { StatusParts } from "./status-details.js";

// A domain error as a google.rpc.Status message, for errors that are data rather than the outcome of a call (the
// error of a failed task). Same code, message and details as the call error of to-connect-error.ts.
export function domainErrorToStatus(error: DomainError): Status {
  return statusOf(statusPartsOf(error));
}

// An INTERNAL status that names what to quote when reporting it; the cause is logged where it was caught.
export function internalStatus(domain: ErrorDomain, message: string, metadata: Record<string, string>): Status {
  return statusOf(internalStatusParts(domain, message, metadata));
}

function statusOf(parts: StatusParts): Status {
  return create(StatusSchema, {
    code: parts.code,
    message: parts.message,
    details: parts.details.map((d) => anyPack(d.desc, create(d.desc, d.value))),
  });
}
