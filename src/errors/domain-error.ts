import { printable } from "./caller-text.js";
import type { ErrorDomain, Reason } from "./reasons.js";
import { ViolationList } from "./violation-list.js";

// Domain errors say what went wrong in terms of the product (a field, a resource, a state), never in terms of a
// protocol. src/errors/to-connect-error.ts is the one place that turns them into wire errors.

export interface FieldViolation {
  // JSON path of the field as callers write it, e.g. "page.limit".
  field: string;
  description: string;
}

export interface ResourceRef {
  resourceType: string;
  resourceName: string;
  owner?: string;
}

export interface PreconditionViolation {
  // "STATE" for a resource in the wrong state.
  type: string;
  subject: string;
  description: string;
}

export interface QuotaViolation {
  subject: string;
  description: string;
}

interface ErrorBase {
  reason: Reason;
  domain: ErrorDomain;
  message: string;
  metadata?: Record<string, string>;
}

export type DomainErrorKind =
  | (ErrorBase & { code: "invalid_argument"; violations: FieldViolation[] })
  | (ErrorBase & { code: "not_found"; resource: ResourceRef })
  | (ErrorBase & { code: "already_exists"; resource: ResourceRef })
  | (ErrorBase & { code: "failed_precondition"; violations: PreconditionViolation[] })
  | (ErrorBase & { code: "resource_exhausted"; violations: QuotaViolation[]; retryAfterSeconds?: number })
  | (ErrorBase & { code: "unavailable"; retryAfterSeconds: number })
  | (ErrorBase & { code: "deadline_exceeded" })
  // A refusal by the rules of a protocol, with the code the protocol gives it (src/errors/protocol-errors.ts).
  | (ErrorBase & { code: "protocol"; grpcCode: number })
  | (ErrorBase & { code: "unauthenticated" })
  | (ErrorBase & { code: "permission_denied" })
  | (ErrorBase & { code: "unimplemented" });

// One class carrying a tagged description keeps `instanceof` checks trivial and lets the mapper switch
// exhaustively over `detail.code`.
export class DomainError extends Error {
  constructor(readonly detail: DomainErrorKind) {
    super(detail.message);
    this.name = "DomainError";
  }
}

// Message and BadRequest list the same violations, bounded as violation-list.ts says, whether they were collected
// in a ViolationList or given here.
export function invalidArgument(
  domain: ErrorDomain,
  violations: ViolationList | readonly FieldViolation[],
  reason: Reason = "REQUEST_INVALID",
): DomainError {
  const list = violations instanceof ViolationList ? violations : ViolationList.of(violations);
  return new DomainError({ code: "invalid_argument", reason, domain, message: list.message(), violations: list.violations() });
}

// The messages below repeat ids and names as the caller sent them (`key <id> not found`), and an id from a path can
// hold any character: every unprintable one (a NUL, an ANSI escape, a bidi override) is written as \uXXXX, as in
// an INVALID_ARGUMENT (caller-text.ts), so that none reaches a log or a terminal raw. The cut only bounds a
// message built around a huge id. ResourceInfo keeps the name exact: it is for programs, which match it.
export const MAX_MESSAGE_CHARS = 1024;

export function notFound(domain: ErrorDomain, reason: Reason, resource: ResourceRef, message: string): DomainError {
  return new DomainError({ code: "not_found", reason, domain, message: printable(message, MAX_MESSAGE_CHARS), resource });
}

export function alreadyExists(domain: ErrorDomain, reason: Reason, resource: ResourceRef, message: string): DomainError {
  return new DomainError({ code: "already_exists", reason, domain, message: printable(message, MAX_MESSAGE_CHARS), resource });
}

export function failedPrecondition(
  domain: ErrorDomain,
  reason: Reason,
  subject: string,
  text: string,
): DomainError {
  const message = printable(text, MAX_MESSAGE_CHARS);
  return new DomainError({
    code: "failed_precondition",
    reason,
    domain,
    message,
    violations: [{ type: "STATE", subject, description: message }],
  });
}
