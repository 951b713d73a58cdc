import { cors as connectCors } from "@connectrpc/connect";
import type { NodeRequest as Req, NodeResponse as Res } from "./node-types.js";

const allowedMethods = [...new Set([...connectCors.allowedMethods, "GET", "POST", "PATCH", "DELETE"])].join(", ");
const allowedHeaders = [
  ...connectCors.allowedHeaders,
  "Authorization",
  "X-Api-Key",
  "X-Workspace-Id",
  "X-Request-Id",
].join(", ");
// What a page may read of an answer beyond the CORS-safelisted headers: the RPC protocols' status, the request id,
// the rate limits; the virtualization API's session token (the one thing POST /api/sessions answers with) and the
// Location of an instantiated vApp; and the Allow of a 405 and the WWW-Authenticate of a 401, which say what to do
// next (docs/access.md, "Browsers").
const exposedHeaders = [
  ...connectCors.exposedHeaders,
  "X-Request-Id",
  "Retry-After",
  "X-RateLimit-Limit",
  "X-RateLimit-Remaining",
  "X-RateLimit-Reset",
  "X-VMWARE-VCLOUD-ACCESS-TOKEN",
  "X-VMWARE-VCLOUD-TOKEN-TYPE",
  "Location",
  "Allow",
  "WWW-Authenticate",
].join(", ");

// CORS for browser clients of every protocol: Connect-web, gRPC-web and REST. Returns true when it answered
// a preflight itself.
export function applyCors(allowedOrigins: string[], req: Req, res: Res): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return false;
  const anyOrigin = allowedOrigins.includes("*");
  if (!anyOrigin && !allowedOrigins.includes(origin)) return false;
  res.setHeader("Access-Control-Allow-Origin", anyOrigin ? "*" : origin);
  if (!anyOrigin) res.setHeader("Vary", "Origin");
  res.setHeader("Access-Control-Expose-Headers", exposedHeaders);
  if (req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined) {
    res.setHeader("Access-Control-Allow-Methods", allowedMethods);
    res.setHeader("Access-Control-Allow-Headers", allowedHeaders);
    res.setHeader("Access-Control-Max-Age", "7200");
    res.writeHead(204);
    res.end();
    return true;
  }
  return false;
}
