import { idOf } from "../../identity/secrets.js";
import { rateLimitExceeded, rateLimiterUnavailable, secondsUntil } from "../../ratelimit/rate-limit-errors.js";
import type { Decision, RateClass, RateLimiter, RateLimits } from "../../ratelimit/rate-limits.js";
import type { Call } from "../call.js";
import type { MethodEntry } from "../method-table.js";
import type { Next, Outcome, Stage } from "../stage.js";

export interface RateLimitSettings {
  limiter: RateLimiter;
  limits: RateLimits;
  // Fully qualified service names, package prefixes written "compute.*", or "*" for all: the services whose calls
  // are limited.
  services: readonly string[];
  // When the limiter's store cannot be asked: let the call through uncounted, or refuse it.
  onStoreFailure: "open" | "closed";
}

// Counts every call of a limited service against its credential's budget for the call's HTTP method (CONTRACT
// section 6) and refuses it with RESOURCE_EXHAUSTED once the minute's or the day's budget is spent. Runs after
// authentication, which established the credential, and before the audit: a refused call does nothing, and a flood
// of refused calls must not write a record each. Answers of limited calls carry X-RateLimit-Limit, -Remaining and
// -Reset (seconds until the shown window starts afresh) as response headers (see apply for native gRPC).
export function rateLimitStage(settings: RateLimitSettings): Stage {
  const { limiter, limits } = settings;
  // The class of each method, or null when its service is not limited: decided on its first call.
  const classes = new Map<MethodEntry, RateClass | null>();

  function classOf(entry: MethodEntry): RateClass | null {
    let rateClass = classes.get(entry);
    if (rateClass === undefined) {
      rateClass = entry.policy.rateClass !== null && isLimited(settings.services, entry.method.parent.typeName) ? entry.policy.rateClass : null;
      classes.set(entry, rateClass);
    }
    return rateClass;
  }

  function apply(call: Call, next: Next, rateClass: RateClass, decision: Decision | null): Outcome {
    if (decision === null) {
      if (settings.onStoreFailure === "closed") throw rateLimiterUnavailable(call.entry.policy.domain);
      return next(call);
    }
    const { shown } = decision;
    // X-RateLimit-* are HTTP headers for HTTP callers, like Retry-After: on every answer of REST, Connect, gRPC-web
    // and the XML surface. A native gRPC caller reads the same numbers from a refusal's details (ErrorInfo, QuotaFailure,
    // RetryInfo) and gets the headers as metadata then; on its successes they are left out, since writing three more
    // headers into every HTTP/2 response cost more than the check itself (docs/rate-limits.md).
    if (!decision.allowed || call.protocol !== "grpc") {
      call.addResponseHeader("x-ratelimit-limit", String(shown.limit));
      call.addResponseHeader("x-ratelimit-remaining", String(shown.remaining));
      call.addResponseHeader("x-ratelimit-reset", String(secondsUntil(shown.resetMs)));
    }
    if (!decision.allowed) throw rateLimitExceeded(call.entry.policy.domain, rateClass, limits[rateClass], shown);
    return next(call);
  }

  return (call, next) => {
    const rateClass = classOf(call.entry);
    if (rateClass === null) return next(call);
    return limiter.take(rateClass, credentialKey(call)).then((decision) => apply(call, next, rateClass, decision));
  };
}

// Whose budget a call draws from: its API key within its workspace when it sent one (by the key's id, never the
// secret), else its principal; a call that needs no credentials and sent none, its address. The principal id is
// used as it is (the authenticator's cached string, whose hash V8 keeps), since building a key string on every
// call cost as much as the count; principal ids never begin with "api-key:" or "address:".
function credentialKey(call: Call): string {
  const { apiKey, workspaceId } = call.credentials;
  if (apiKey !== undefined) return `api-key:${idOf("api-key", apiKey) ?? "?"}:${workspaceId ?? ""}`;
  if (call.principal !== "anonymous") return call.principal;
  return `address:${call.peerAddress}`;
}

function isLimited(services: readonly string[], service: string): boolean {
  return services.some((s) => s === "*" || (s.endsWith(".*") ? service.startsWith(s.slice(0, -1)) : s === service));
}
