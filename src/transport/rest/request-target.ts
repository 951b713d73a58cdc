import type { IncomingHttpHeaders } from "node:http";
import { Code } from "@connectrpc/connect";
import type { DomainError } from "../../errors/domain-error.js";
import { protocolError, requestHeadTooLarge } from "../../errors/protocol-errors.js";
import type { ErrorDomain } from "../../errors/reasons.js";
import { requestIdOf } from "../../pipeline/call.js";
import { MAX_HEAD_BYTES, http2HeadBytes } from "../http2-head-size.js";
import type { NodeRequest, NodeResponse } from "../node-types.js";
import { absoluteForm } from "./absolute-form.js";
import { refusalAnswer } from "./parser-refusals.js";
import { isHostAndPort } from "./uri-host.js";
import type { RouteTable } from "./route-table.js";

const BAD_HOST = "the Host header must be a host name or address, with an optional port (RFC 9110, section 7.2)";

// The request target and the authority of a request, checked before anything routes it. The XML surface writes the
// authority into every href it answers with (docs/vcd.md), so nothing but a host and optional port may pass.
// HTTP/1.x, as RFC 9112 section 3.2 has it:
// - a server MUST accept the absolute-form (`GET http://host/path HTTP/1.1`, 3.2.2), which proxies send and any
//   client may: it is served as the origin-form it names, with the target's authority as its Host (a server MUST
//   ignore the Host header then), so that every surface routes and links it as it would `/path`;
// - a server MUST answer 400 to an HTTP/1.1 request without a Host header, with more than one, or with one whose
//   value is not a host and optional port (3.2; RFC 9110 section 7.2: `uri-host [ ":" port ]`, possibly empty).
//   HTTP/1.0 needs no Host, but one it sends is held to the same form.
// HTTP/2: a head larger than HTTP/1.1 takes is refused as Node's HTTP/1.1 parser refuses it (431
// REQUEST_HEAD_TOO_LARGE, parser-refusals.ts; RFC 9113 10.5.1 names 431 for it). And as RFC 9113 section 8.3.1 has
// it: `:authority` MUST NOT carry user information, and a Host header that names another authority makes the request
// malformed. Node checks neither (it served `:authority: u@evil.test`,
// and `host: evil.test` beside `:authority: 127.0.0.1`, whose links then named evil.test), so `:authority` and Host
// are held to the HTTP/1.1 Host header's form and must agree when both are sent (a request with neither is reset by
// Node's HTTP/2 library before it is announced).
// HTTP/1.1's body framing: a transfer coding other than a final "chunked" is refused 501 (RFC 9112 section 6.1: a
// server SHOULD answer 501 to a transfer coding it does not understand). Node's parser frames the body by the last
// "chunked" and said nothing of the codings before it: `x-bogus, chunked` was served as plain JSON, and `gzip,
// chunked` refused as "not valid UTF-8" (a probe, 2026-11-28). Compression of a body is Content-Encoding's, which
// REST and Connect refuse or take as docs/callers.md says.
// A refusal is the JSON google.rpc.Status every REST refusal is (docs/callers.md), the virtualization API's Error
// document under `/api/`; Node's own refusal of a missing Host (`requireHostHeader`) was a 400 with no body.
//
// Rewrites an absolute-form target in place; returns true when it answered the request with a refusal.
export function refuseRequestTarget(req: NodeRequest, res: NodeResponse, routes: RouteTable): boolean {
  const refusal =
    req.httpVersionMajor === 2
      ? http2HeadRefusal(req.headers, req.rawHeaders)
      : (invalid(http1TargetProblem(req)) ?? transferCodingRefusal(req.headers));
  if (refusal === null) return false;
  const given = req.headers["x-request-id"];
  const requestId = requestIdOf(Array.isArray(given) ? given[0] : given);
  const path = (req.url ?? "/").charCodeAt(0) === 0x2f ? (req.url ?? "/") : null;
  const line = path === null ? null : { httpMethod: req.method ?? "GET", target: path };
  const { status, type, body } = refusalAnswer(line, refusal, requestId, routes);
  const headers: Record<string, string | number> = { "content-type": type, "content-length": Buffer.byteLength(body), "x-request-id": requestId };
  // HTTP/1.1 cannot tell what else the sender of a malformed request meant; HTTP/2 refuses the one stream, and
  // forbids a Connection header.
  if (req.httpVersionMajor !== 2) headers.connection = "close";
  const out = res as { writeHead(status: number, headers: Record<string, string | number>): unknown; end(body: string): unknown };
  out.writeHead(status, headers);
  out.end(body);
  return true;
}

// The authority a request was sent to, once refuseRequestTarget has let it through: `:authority` over HTTP/2
// (RFC 9113 8.3.1: a Host header is not used when it is present), else the Host header, which an absolute-form
// target's authority has replaced. Undefined when the request has none (HTTP/1.0).
export function requestAuthority(headers: IncomingHttpHeaders): string | undefined {
  return pseudoAuthority(headers) ?? headers.host;
}

// Node's header object types every name it does not know as possibly repeated; a pseudo-header never is.
function pseudoAuthority(headers: IncomingHttpHeaders): string | undefined {
  const value = headers[":authority"];
  return Array.isArray(value) ? value[0] : value;
}

// Why an HTTP/1.x request's target or Host header is refused, or null; an absolute-form target is rewritten.
function http1TargetProblem(req: NodeRequest): string | null {
  const url = req.url ?? "/";
  let target: { path: string; authority: string } | null = null;
  if (url.charCodeAt(0) !== 0x2f /* "/" */ && url !== "*") {
    target = absoluteForm(url);
    if (target === null) return "the request target must be a path, or an absolute http or https URI with a host (RFC 9112, section 3.2)";
  }
  if (target !== null) {
    req.url = target.path;
    // The target's authority stands for the Host header, which is ignored then.
    req.headers.host = target.authority;
  }
  const hosts = hostHeaderCount(req.rawHeaders);
  if (hosts === 0 && req.httpVersionMinor >= 1) return "an HTTP/1.1 request must have a Host header (RFC 9112, section 3.2)";
  if (hosts > 1 && req.httpVersionMinor >= 1) return "an HTTP/1.1 request must have one Host header, not several (RFC 9112, section 3.2)";
  return hosts > 0 && !isHostAndPort(req.headers.host ?? "") ? BAD_HOST : null;
}

type Refusal = (domain: ErrorDomain) => DomainError;

// A transfer coding of an HTTP/1.x request other than "chunked" once, last; null when there is none.
function transferCodingRefusal(headers: IncomingHttpHeaders): Refusal | null {
  const given = headers["transfer-encoding"];
  if (given === undefined) return null;
  // Empty list elements are not codings (RFC 9110 5.6.1: a recipient ignores them).
  const codings = given
    .split(",")
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== "");
  if (codings.length === 1 && codings[0] === "chunked") return null;
  const message =
    "the only transfer coding this server takes is chunked, once (RFC 9112, section 6.1): send the body with Content-Length or Transfer-Encoding: chunked, and a compressed body with Content-Encoding";
  return (domain) => protocolError(domain, Code.Unimplemented, message);
}

function invalid(problem: string | null): Refusal | null {
  return problem === null ? null : (domain) => protocolError(domain, Code.InvalidArgument, problem);
}

// Why an HTTP/2 stream's head is refused, or null: larger than HTTP/1.1 takes (http2-head-size.ts), or its
// `:authority` and Host header. Exported for the direct gRPC adapter, which serves streams before they become
// requests (src/server.ts): a stream refused here is left to the request listener, which answers it as every other.
export function http2HeadRefusal(headers: IncomingHttpHeaders, rawHeaders: readonly string[]): Refusal | null {
  if (http2HeadBytes(rawHeaders) > MAX_HEAD_BYTES) return (domain) => requestHeadTooLarge(domain, MAX_HEAD_BYTES);
  return invalid(http2AuthorityProblem(headers, rawHeaders));
}

function http2AuthorityProblem(headers: IncomingHttpHeaders, rawHeaders: readonly string[]): string | null {
  const authority = pseudoAuthority(headers);
  const hosts = hostHeaderCount(rawHeaders);
  if (authority !== undefined && !isHostAndPort(authority)) {
    return "the :authority must be a host name or address, with an optional port and no user information (RFC 9113, section 8.3.1)";
  }
  if (hosts > 1) return "an HTTP/2 request must have at most one Host header (RFC 9113, section 8.3.1)";
  const host = headers.host;
  if (host === undefined) return null;
  if (!isHostAndPort(host)) return BAD_HOST;
  // Host names are case-insensitive; a port is compared as written.
  if (authority !== undefined && host.toLowerCase() !== authority.toLowerCase()) return "the Host header must name the :authority of the request, if sent (RFC 9113, section 8.3.1)";
  return null;
}

function hostHeaderCount(raw: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 4 && name.toLowerCase() === "host") count++;
  }
  return count;
}
