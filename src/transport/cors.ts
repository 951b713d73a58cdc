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
const exposedHeaders = [
  ...connectCors.exposedHeaders,
  "X-Request-Id",
  "Retry-After",
  "X-RateLimit-Limit",
  "X-RateLimit-Remaining",
  "X-RateLimit-Reset",
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
