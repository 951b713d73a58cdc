import type { Registry } from "prom-client";
import type { ConnectError } from "@connectrpc/connect";
import type { Logger } from "pino";
import { callErrorOf } from "../pipeline/call-error.js";
import { tokenOf } from "../pipeline/stages/credentials.js";
import { permissionDenied } from "../identity/identity-errors.js";
import type { AccessPolicy } from "../identity/access-policy.js";
import type { Authenticator } from "../identity/authenticator.js";
import { toConnectError } from "../errors/to-connect-error.js";
import { requestIdOf } from "../pipeline/call.js";
import type { NodeRequest, NodeResponse } from "./node-types.js";
import { BEARER_CHALLENGE } from "./auth-challenge.js";
import { connectErrorToStatusJson, httpStatusOfError, retryAfterSeconds } from "./rest/status-json.js";

// Who may read /metrics (the METRICS setting): "open" to anyone who reaches the port (a private network that
// Prometheus scrapes), "admin" to a principal with the admin role on "*" only.
export type MetricsAccess = "open" | "admin";

export interface MetricsEndpointOptions {
  registry: Registry;
  access: MetricsAccess;
  authenticator: Authenticator;
  policy: AccessPolicy;
  logger: Logger;
}

// GET /metrics: the registry in Prometheus's text format. Refusals are google.rpc.Status JSON with the HTTP status
// of their code, as on the REST surface; authentication failures count against the caller's address like those of
// any call.
export function createMetricsEndpoint(opts: MetricsEndpointOptions): (req: NodeRequest, res: NodeResponse) => Promise<void> {
  async function check(req: NodeRequest): Promise<void> {
    if (opts.access === "open") return;
    const header = req.headers.authorization;
    const credentials = { token: tokenOf(Array.isArray(header) ? header[0] : header), apiKey: undefined, workspaceId: undefined };
    const principal = await opts.authenticator.authenticate(credentials, { peerAddress: req.socket.remoteAddress ?? "unknown" }, "cloudplane");
    if (!(await opts.policy.isAdminEverywhere(principal))) {
      throw permissionDenied("cloudplane", `principal ${principal} may not read /metrics: it needs the admin role on scope "*" (or METRICS=open)`, {
        permission: "metrics",
        scope: "*",
      });
    }
  }

  return async (req, res) => {
    const requestId = requestIdOf(req.headers["x-request-id"] as string | undefined);
    res.setHeader("x-request-id", requestId);
    try {
      await check(req);
      const text = await opts.registry.metrics();
      res.writeHead(200, { "content-type": opts.registry.contentType });
      res.end(text);
    } catch (thrown) {
      const failure = callErrorOf(thrown, "cloudplane", requestId);
      if (failure.internal) opts.logger.error({ requestId, err: thrown }, "GET /metrics failed");
      const error: ConnectError = toConnectError(failure, null);
      const retryAfter = retryAfterSeconds(error);
      if (retryAfter !== undefined) res.setHeader("retry-after", String(retryAfter));
      const status = httpStatusOfError(error);
      if (status === 401) res.setHeader("www-authenticate", BEARER_CHALLENGE);
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(connectErrorToStatusJson(error)));
    }
  };
}
