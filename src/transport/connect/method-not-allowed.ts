import { methodNotAllowed } from "../../errors/protocol-errors.js";
import type { ErrorDomain } from "../../errors/reasons.js";
import { statusPartsOf } from "../../errors/status-details.js";
import { toConnectError } from "../../errors/to-connect-error.js";
import { requestIdOf } from "../../pipeline/call.js";
import { CallError } from "../../pipeline/call-error.js";
import type { NodeRequest, NodeResponse } from "../node-types.js";
import { connectErrorToStatusJson, httpStatusOfError } from "../rest/status-json.js";

// An RPC path called with an HTTP method its procedure does not take. connect-node's router answered 405 with no
// body and no Allow header, which RFC 9110 15.5.6 requires of every 405. Answered as the REST surface answers a route
// called so: 405, `Allow`, and the JSON google.rpc.Status with METHOD_NOT_ALLOWED in the service's domain. `allow`
// is what connect-node serves for the procedure, read from its descriptor: POST, and GET too for a method marked
// `idempotency_level = NO_SIDE_EFFECTS` (Connect's GET form).
export function answerMethodNotAllowed(req: NodeRequest, res: NodeResponse, domain: ErrorDomain, allowedMethods: readonly string[]): void {
  const given = req.headers["x-request-id"];
  const requestId = requestIdOf(Array.isArray(given) ? given[0] : given);
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const allow = [...allowedMethods].sort();
  const refusal = methodNotAllowed(domain, req.method ?? "", q < 0 ? url : url.slice(0, q), allow);
  const error = toConnectError(new CallError(statusPartsOf(refusal), false), null);
  const body = JSON.stringify(connectErrorToStatusJson(error));
  const out = res as { writeHead(status: number, headers: Record<string, string | number>): unknown; end(body: string): unknown };
  // A HEAD gets the headers alone: Node sends no body for it.
  out.writeHead(httpStatusOfError(error), {
    allow: allow.join(", "),
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    "x-request-id": requestId,
  });
  out.end(body);
}
