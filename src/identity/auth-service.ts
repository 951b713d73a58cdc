import type { AuthService } from "../../gen/compute/auth/v2/auth_pb.js";
import { invalidArgument } from "../errors/domain-error.js";
import type { FieldViolation } from "../errors/domain-error.js";
import type { ServiceHandlers } from "../pipeline/handlers.js";
import type { Authenticator } from "./authenticator.js";

// The transport side of token issuance (POST /public/v2/service_auth and its RPC).
export function createAuthService(authenticator: Authenticator): ServiceHandlers<typeof AuthService> {
  return {
    async serviceAuth(req, call) {
      const violations: FieldViolation[] = [];
      if (req.clientId === "") violations.push({ field: "client_id", description: "client_id is required" });
      if (req.clientSecret === "") violations.push({ field: "client_secret", description: "client_secret is required" });
      if (violations.length > 0) throw invalidArgument("compute", violations);
      const issued = await authenticator.issueToken(req.clientId, req.clientSecret, call.peerAddress, "compute");
      // The audit trail records the issuance as the account's own act.
      call.principal = issued.principalId;
      return { token: { accessToken: issued.text, tokenType: "Bearer", expiresIn: issued.expiresInSeconds } };
    },
  };
}
