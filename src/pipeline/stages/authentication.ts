import type { Authenticator } from "../../identity/authenticator.js";
import { unauthenticated } from "../../identity/identity-errors.js";
import type { Outcome, Stage } from "../stage.js";

// Establishes who the caller is from the credentials the credentials stage read; refuses a caller who is not
// authenticated (UNAUTHENTICATED), except on the public methods (health, reflection, obtaining a token).
export function authenticationStage(authenticator: Authenticator): Stage {
  return (call, next) => {
    const policy = call.entry.policy;
    if (policy.public) return next(call);
    const principal = authenticator.authenticate(call.credentials, call, policy.domain);
    const proceed = (id: string): Outcome => {
      if (policy.requiresApiKey && call.credentials.apiKey === undefined) {
        throw unauthenticated(policy.domain, "this call needs x-api-key and x-workspace-id besides Authorization");
      }
      call.principal = id;
      return next(call);
    };
    // A credential not cached is read from the store, and a failure counted against the caller's address, first.
    return typeof principal === "string" ? proceed(principal) : principal.then(proceed);
  };
}
