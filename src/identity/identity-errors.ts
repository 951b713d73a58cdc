import { DomainError } from "../errors/domain-error.js";
import type { ErrorDomain } from "../errors/reasons.js";

// Refusals of the identity stages. Their messages say what to do and never echo a credential.

export function unauthenticated(domain: ErrorDomain, message: string): DomainError {
  return new DomainError({ code: "unauthenticated", reason: "UNAUTHENTICATED", domain, message });
}

export function permissionDenied(domain: ErrorDomain, message: string, metadata: Record<string, string>): DomainError {
  return new DomainError({ code: "permission_denied", reason: "PERMISSION_DENIED", domain, message, metadata });
}

export function apiKeyOfAnotherWorkspace(domain: ErrorDomain): DomainError {
  return new DomainError({
    code: "permission_denied",
    reason: "API_KEY_WORKSPACE_MISMATCH",
    domain,
    message: "the API key of x-api-key belongs to another workspace than the one x-workspace-id names",
  });
}

export function tooManyFailedAuthentications(domain: ErrorDomain, subject: string, retryAfterSeconds: number): DomainError {
  const message = `too many failed authentications from this ${subject}: try again in ${retryAfterSeconds} s`;
  return new DomainError({
    code: "resource_exhausted",
    reason: "AUTHENTICATION_RATE_LIMITED",
    domain,
    message,
    violations: [{ subject, description: message }],
    retryAfterSeconds,
  });
}
