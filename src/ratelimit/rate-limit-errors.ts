import { DomainError } from "../errors/domain-error.js";
import type { ErrorDomain } from "../errors/reasons.js";
import type { ClassLimits, RateClass, WindowState } from "./rate-limits.js";

// The refusals of the rate-limit stage. Neither names the credential: the caller knows which one it sent.

export function rateLimitExceeded(domain: ErrorDomain, rateClass: RateClass, limits: ClassLimits, window: WindowState): DomainError {
  const retryAfterSeconds = secondsUntil(window.resetMs);
  const counted = rateClass === "GET" ? "GET" : "POST, PATCH and DELETE";
  const message = `rate limit exceeded: at most ${window.limit} ${counted} calls a ${window.window} for this credential (${limits.perMinute} a minute, ${limits.perDay} a day); retry in ${retryAfterSeconds} s`;
  return new DomainError({
    code: "resource_exhausted",
    reason: "RATE_LIMIT_EXCEEDED",
    domain,
    message,
    metadata: { method: rateClass, limitPerMinute: String(limits.perMinute), limitPerDay: String(limits.perDay) },
    violations: [{ subject: `${rateClass} calls per ${window.window}`, description: `at most ${window.limit} ${counted} calls a ${window.window} for each credential` }],
    retryAfterSeconds,
  });
}

// Refused rather than let through uncounted (RATE_LIMIT_STORE_FAILURE=closed).
export function rateLimiterUnavailable(domain: ErrorDomain): DomainError {
  return new DomainError({
    code: "unavailable",
    reason: "RATE_LIMITER_UNAVAILABLE",
    domain,
    message: "the rate limits cannot be checked now (their store is unreachable); retry shortly",
    retryAfterSeconds: 5,
  });
}

// Whole seconds, rounded up, at least 1: a Retry-After of 0 would invite an immediate retry into the same window.
export function secondsUntil(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
