import { Code } from "@connectrpc/connect";
import { protocolError } from "../../errors/protocol-errors.js";
import { requestIdOf } from "../../pipeline/call.js";
import type { NodeRequest, NodeResponse } from "../node-types.js";
import { absoluteForm } from "./absolute-form.js";
import { refusalAnswer } from "./parser-refusals.js";
import { isHostAndPort } from "./uri-host.js";
import type { RouteTable } from "./route-table.js";

// The request target and Host header of an HTTP/1.1 request, as RFC 9112 section 3.2 has them, checked before
// anything routes the request:
// - a server MUST accept the absolute-form (`GET http://host/path HTTP/1.1`, 3.2.2), which proxies send and any
//   client may: it is served as the origin-form it names, with the target's authority as its Host (a server MUST
//   ignore the Host header then), so that every surface routes and links it as it would `/path`;
// - a server MUST answer 400 to an HTTP/1.1 request without a Host header, with more than one, or with one whose
//   value is not a host and optional port (3.2; RFC 9110 section 7.2: `uri-host [ ":" port ]`, possibly empty); the
//   XML surface writes that value into every href it answers with (docs/vcd.md). Node's own
//   refusal of a missing one (`requireHostHeader`) is a 400 with no body, and the TLS server's HTTP/1.1 does not
//   check it at all; here it is the JSON google.rpc.Status every REST refusal is (docs/callers.md), the
//   virtualization API's Error document under `/api/`, and the connection is closed.
// HTTP/2 requests carry `:path` and `:authority`, which Node checks itself; HTTP/1.0 needs no Host, but one it sends
// is held to the same form.
//
// Rewrites an absolute-form target in place; returns true when it answered the request with a refusal.
export function refuseRequestTarget(req: NodeRequest, res: NodeResponse, routes: RouteTable): boolean {
  if (req.httpVersionMajor !== 1) return false;
  const url = req.url ?? "/";
  let problem: string | null = null;
  let target: { path: string; authority: string } | null = null;
  if (url.charCodeAt(0) !== 0x2f /* "/" */ && url !== "*") {
    target = absoluteForm(url);
    if (target === null) problem = "the request target must be a path, or an absolute http or https URI with a host (RFC 9112, section 3.2)";
  }
  if (problem === null) {
    const hosts = hostHeaderCount(req.rawHeaders);
    if (hosts === 0 && req.httpVersionMinor >= 1) problem = "an HTTP/1.1 request must have a Host header (RFC 9112, section 3.2)";
    else if (hosts > 1 && req.httpVersionMinor >= 1) problem = "an HTTP/1.1 request must have one Host header, not several (RFC 9112, section 3.2)";
    // An absolute-form target's authority stands for the Host header, which is ignored then.
    else if (hosts > 0 && target === null && !isHostAndPort(req.headers.host ?? "")) {
      problem = "the Host header must be a host name or address, with an optional port (RFC 9110, section 7.2)";
    }
  }
  if (target !== null) {
    req.url = target.path;
    req.headers.host = target.authority;
  }
  if (problem === null) return false;
  const refusal = problem;
  const given = req.headers["x-request-id"];
  const requestId = requestIdOf(Array.isArray(given) ? given[0] : given);
  const path = (req.url ?? "/").charCodeAt(0) === 0x2f ? (req.url ?? "/") : null;
  const line = path === null ? null : { httpMethod: req.method ?? "GET", target: path };
  const { status, type, body } = refusalAnswer(line, (domain) => protocolError(domain, Code.InvalidArgument, refusal), requestId, routes);
  const out = res as { writeHead(status: number, headers: Record<string, string | number>): unknown; end(body: string): unknown };
  out.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body), "x-request-id": requestId, connection: "close" });
  out.end(body);
  return true;
}

function hostHeaderCount(raw: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 4 && name.toLowerCase() === "host") count++;
  }
  return count;
}
