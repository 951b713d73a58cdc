import { DomainError, invalidArgument, notFound } from "../../errors/domain-error.js";
import { overLimits } from "../../errors/protocol-errors.js";
import type { ErrorDomain, Reason } from "../../errors/reasons.js";
import type { ViolationList } from "../../errors/violation-list.js";

// Errors of the REST layer itself (routing, body, query string).

// What is wrong with a path value or query parameter that cannot be percent-decoded. The value is not repeated.
export const MALFORMED_ESCAPE = "a malformed percent-encoded sequence (a % not followed by two hex digits, or bytes that are not UTF-8)";

// A request that does not fit its route's method: one bad field. An empty field means the request as a whole
// (e.g. a body that is not JSON); the message then carries only the description. The REST layer stops at the
// first bad field, as grpc-gateway does, so this one violation is all it reports. The code that finds it does not
// know whose route it is; the REST handler gives it the route's service domain (`toDomainError`).
export class BadRequest extends Error {
  constructor(
    readonly reason: Reason,
    readonly field: string,
    readonly description: string,
  ) {
    super(description);
    this.name = "BadRequest";
  }

  // Fields built from a caller's names are bounded by invalidArgument.
  toDomainError(domain: ErrorDomain): DomainError {
    return invalidArgument(domain, [{ field: this.field, description: this.description }], this.reason);
  }
}

// A request over the limits its type declares, found by counting its JSON before parsing it
// (src/transport/limits/json-count.ts): the same refusal every adapter gives, with the route's domain.
export class LimitsExceeded extends Error {
  constructor(readonly violations: ViolationList) {
    super(violations.message());
    this.name = "LimitsExceeded";
  }

  toDomainError(domain: ErrorDomain): DomainError {
    return overLimits(domain, this.violations);
  }
}

export function badRequest(reason: Reason, field: string, description: string): BadRequest {
  return new BadRequest(reason, field, description);
}

export function routeNotFound(httpMethod: string, path: string): DomainError {
  return notFound(
    "cloudplane",
    "ROUTE_NOT_FOUND",
    { resourceType: "route", resourceName: path },
    `no REST route matches ${httpMethod} ${path}`,
  );
}
