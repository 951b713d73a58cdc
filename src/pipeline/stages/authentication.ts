import type { Authenticator } from "../../identity/authenticator.js";
import { unauthenticated } from "../../identity/identity-errors.js";
import type { Call } from "../call.js";
import type { Next, Outcome, Stage } from "../stage.js";

// Establishes who the caller is from the credentials the credentials stage read; refuses a caller who is not
// authenticated (UNAUTHENTICATED), except on the public methods (health, reflection, obtaining a token).
export function authenticationStage(authenticator: Authenticator): Stage {
  function admit(call: Call, principal: string, next: Next): Outcome {
    const policy = call.entry.policy;
    // The configuration calls of the public API v2 take all three headers (CONTRACT section 6): an API key alone
    // identifies its principal, but the document asks for the token as well.
    if (policy.requiresApiKey) {
      const { token, apiKey, workspaceId } = call.credentials;
      const missing = [token === undefined ? "Authorization" : "", apiKey === undefined ? "x-api-key" : "", workspaceId === undefined ? "x-workspace-id" : ""];
      const named = missing.filter((header) => header !== "");
      if (named.length > 0) {
        throw unauthenticated(policy.domain, `this call needs Authorization, x-api-key and x-workspace-id; missing: ${named.join(", ")}`);
      }
    }
    call.principal = principal;
    return recheckLongRunning(call, next(call));
  }

  // A call that waits by design (WaitTask: up to a minute) outlived a revocation, which holds for every new call
  // within a second: a token revoked while it waited still got the finished task, its result included (a probe,
  // 2026-11-28). Its answer is held to the credentials as they are once it is ready: checked again then (a cached
  // lookup), and refused UNAUTHENTICATED if they were revoked or expired meanwhile.
  function recheckLongRunning(call: Call, outcome: Outcome): Outcome {
    if (!call.entry.policy.longRunning || !(outcome instanceof Promise)) return outcome;
    return outcome.then(async (answer) => {
      await authenticator.authenticate(call.credentials, call, call.entry.policy.domain);
      return answer;
    });
  }

  return (call, next) => {
    const policy = call.entry.policy;
    if (policy.public) return next(call);
    const principal = authenticator.authenticate(call.credentials, call, policy.domain);
    // Cached credentials answer synchronously. One not cached is read from the store first, and a failure is counted
    // against the caller's address before it is answered, asynchronously.
    if (typeof principal === "string") return admit(call, principal, next);
    return principal.then((found) => admit(call, found, next));
  };
}
