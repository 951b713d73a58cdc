import { DomainError, invalidArgument, notFound } from "../../errors/domain-error.js";
import type { Reason } from "../../errors/reasons.js";

// Errors of the REST layer itself (routing, body, query string). They belong to no product area, hence the
// "cloudplane" domain; src/errors/to-connect-error.ts turns them into wire errors like any other DomainError.

// One bad field. An empty field means the request as a whole (e.g. a body that is not JSON); the message then
// carries only the description. The REST layer stops at the first bad field, as grpc-gateway does, so this one
// violation is all it reports; fields it builds from a caller's names are bounded by invalidArgument.
export function badRequest(reason: Reason, field: string, description: string): DomainError {
  return invalidArgument("cloudplane", [{ field, description }], reason);
}

export function routeNotFound(httpMethod: string, path: string): DomainError {
  return notFound(
    "cloudplane",
    "ROUTE_NOT_FOUND",
    { resourceType: "route", resourceName: path },
    `no REST route matches ${httpMethod} ${path}`,
  );
}

// The standard mapping of UNIMPLEMENTED is HTTP 501; the REST handler answers 405 for this reason (see
// status-json.ts).
export function methodNotAllowed(httpMethod: string, path: string, allow: readonly string[]): DomainError {
  return new DomainError({
    code: "unimplemented",
    reason: "METHOD_NOT_ALLOWED",
    domain: "cloudplane",
    message: `${path} does not accept ${httpMethod}; allowed: ${allow.join(", ")}`,
    metadata: { allow: allow.join(", ") },
  });
}

// Retrying does not help, so no retry delay; the REST handler answers 413 for this reason.
export function requestTooLarge(maxBytes: number): DomainError {
  const description = `the request body must be at most ${maxBytes} bytes`;
  return new DomainError({
    code: "resource_exhausted",
    reason: "REQUEST_TOO_LARGE",
    domain: "cloudplane",
    message: description,
    violations: [{ subject: "request body", description }],
  });
}
