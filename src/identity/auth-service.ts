import type { AuthService } from "../../gen/compute/auth/v2/auth_pb.js";
import { invalidArgument } from "../errors/domain-error.js";
import type { FieldViolation } from "../errors/domain-error.js";
import type { ServiceHandlers } from "../pipeline/handlers.js";
import type { Authenticator } from "./authenticator.js";

// Client ids and secrets this server issues are far shorter (about 15 and 65 characters). The bounds keep what a
// failed attempt costs small: the failure limiter remembers every client id tried for a minute, and 2 MB ones sent
// from many addresses, each within its address's limit, took the server to 4 GB (a probe, 2026-11-27).
const MAX_CLIENT_ID_CHARS = 128;
const MAX_CLIENT_SECRET_CHARS = 256;

// The transport side of token issuance (POST /public/v2/service_auth and its RPC).
export function createAuthService(authenticator: Authenticator): ServiceHandlers<typeof AuthService> {
  return {
    async serviceAuth(req, call) {
      const violations: FieldViolation[] = [];
      if (req.clientId === "") violations.push({ field: "client_id", description: "client_id is required" });
      else if (req.clientId.length > MAX_CLIENT_ID_CHARS) {
        violations.push({ field: "client_id", description: `must be at most ${MAX_CLIENT_ID_CHARS} characters, got ${req.clientId.length}` });
      }
      if (req.clientSecret === "") violations.push({ field: "client_secret", description: "client_secret is required" });
      else if (req.clientSecret.length > MAX_CLIENT_SECRET_CHARS) {
        violations.push({ field: "client_secret", description: `must be at most ${MAX_CLIENT_SECRET_CHARS} characters, got ${req.clientSecret.length}` });
      }
      if (violations.length > 0) throw invalidArgument("compute", violations);
      const issued = await authenticator.issueToken(req.clientId, req.clientSecret, call.peerAddress, "compute");
      // The audit trail records the issuance as the account's own act.
      call.principal = issued.principalId;
      return { token: { accessToken: issued.text, tokenType: "Bearer", expiresIn: issued.expiresInSeconds } };
    },
  };
}
