import { printable } from "../errors/caller-text.js";
import { DomainError, MAX_MESSAGE_CHARS } from "../errors/domain-error.js";
import type { ErrorDomain } from "../errors/reasons.js";

// Refusals of the identity stages. Their messages say what to do and never echo a credential.

export function unauthenticated(domain: ErrorDomain, message: string): DomainError {
  return new DomainError({ code: "unauthenticated", reason: "UNAUTHENTICATED", domain, message });
}

// The message and metadata repeat the scope the caller named, which no check has bounded yet (authorization runs
// before the handler reads the request): cut and escaped as NOT_FOUND's message is (domain-error.ts). A parentId of
// a million characters made a 403 of 2.3 MB, a native gRPC caller got RST_STREAM instead of its status, and an ESC or
// NUL in it reached the XML surface's Error document raw (a probe, 2026-11-28).
export function permissionDenied(domain: ErrorDomain, message: string, metadata: Record<string, string>): DomainError {
  const bounded = Object.fromEntries(Object.entries(metadata).map(([key, value]) => [key, printable(value, MAX_MESSAGE_CHARS)]));
  return new DomainError({ code: "permission_denied", reason: "PERMISSION_DENIED", domain, message: printable(message, MAX_MESSAGE_CHARS), metadata: bounded });
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
