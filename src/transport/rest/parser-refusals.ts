import { STATUS_CODES, maxHeaderSize } from "node:http";
import type { Duplex } from "node:stream";
import { requestHeadTooLarge, requestNotParsed } from "../../errors/protocol-errors.js";
import type { DomainError } from "../../errors/domain-error.js";
import type { ErrorDomain } from "../../errors/reasons.js";
import { callErrorOf } from "../../pipeline/call-error.js";
import { requestIdOf } from "../../pipeline/call.js";
import { toConnectError } from "../../errors/to-connect-error.js";
import { errorAnswer } from "../vcd/vcd-errors.js";
import { isVcdPath } from "../vcd/vcd-paths.js";
import { absoluteForm } from "./absolute-form.js";
import type { RouteTable } from "./route-table.js";
import { connectErrorToStatusJson, httpStatusOfError } from "./status-json.js";

// What Node's HTTP/1.1 server gives a "clientError" listener: the parser's error, with the bytes it was reading.
export type ParserError = Error & { code?: string; rawPacket?: Buffer };

// The socket as that listener gets it, with the response Node may already be writing on it (keep-alive), which
// Node's own default answer checks too.
type ClientSocket = Duplex & { _httpMessage?: { headersSent?: boolean } | null };

// Node's HTTP/1.1 parser refuses a request before any handler sees it when its head is larger than Node allows
// (http.maxHeaderSize, 16 KiB by default) or cannot be parsed, and by default answers with a bare status line and no
// body. REST callers are promised a google.rpc.Status in JSON for every refusal (CONTRACT section 3), so these are
// answered like every other refusal: 431 REQUEST_HEAD_TOO_LARGE or 400 PROTOCOL_ERROR, with the ErrorInfo domain of
// the service whose route the request line names when the parser had read that line (else "cloudplane", as for an
// unknown route), and the connection closed, since the parser cannot tell where the next request would start. A
// request that timed out gets Node's own answer (408); a connection reset gets none. A request line of the
// virtualization API (`/api/...`) is answered with its Error document instead, as every failure there is.
export function answerParserRefusal(err: ParserError, socket: ClientSocket, routes: RouteTable): void {
  if (err.code === "ECONNRESET" || !socket.writable || socket._httpMessage?.headersSent === true) {
    socket.destroy();
    return;
  }
  if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    socket.end("HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n");
    return;
  }
  const line = requestLine(err.rawPacket);
  const requestId = requestIdOf(null);
  const { status, type, body } = refusalAnswer(
    line,
    (domain) => (err.code === "HPE_HEADER_OVERFLOW" ? requestHeadTooLarge(domain, maxHeaderSize) : requestNotParsed(domain)),
    requestId,
    routes,
  );
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\n` +
      `content-type: ${type}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
      `x-request-id: ${requestId}\r\nconnection: close\r\n\r\n${body}`,
  );
}

export interface RequestLine {
  httpMethod: string;
  // In origin-form (`/path?query`).
  target: string;
}

// The answer to a request refused before any route is read: a REST google.rpc.Status in JSON with the domain of the
// service whose route or RPC method the request line names (else "cloudplane"), or for the virtualization API's paths its Error
// document (no version was agreed).
export function refusalAnswer(
  line: RequestLine | null,
  refusalOf: (domain: ErrorDomain) => DomainError,
  requestId: string,
  routes: RouteTable,
): { status: number; type: string; body: string } {
  const vcd = line !== null && isVcdPath(line.target);
  const domain = vcd ? "compute" : domainOfRequestLine(line, routes);
  const refusal = refusalOf(domain);
  if (vcd) {
    const { status, body } = errorAnswer(null, refusal, domain, requestId, null);
    return { status, type: "application/xml", body };
  }
  const error = toConnectError(callErrorOf(refusal, domain, requestId), null);
  return { status: httpStatusOfError(error), type: "application/json", body: JSON.stringify(connectErrorToStatusJson(error)) };
}

// The method and target of the request line ("POST /v1/encrypt?x=1 HTTP/1.1"), from the bytes the parser was
// reading when it failed: the whole head when it came in one read, as it does from most clients. Null when the
// line was not read to its end.
function requestLine(raw: Buffer | undefined): RequestLine | null {
  if (raw === undefined) return null;
  const end = raw.indexOf("\r\n");
  if (end < 0) return null;
  const [httpMethod, target] = raw.subarray(0, end).toString("latin1").split(" ");
  if (httpMethod === undefined || target === undefined) return null;
  if (target.startsWith("/")) return { httpMethod, target };
  // The absolute-form names the same route as its path (request-target.ts).
  const path = absoluteForm(target)?.path;
  return path === undefined ? null : { httpMethod, target: path };
}

// The domain of the route the request line names, or of the method its RPC path names.
export function domainOfRequestLine(line: RequestLine | null, routes: RouteTable): ErrorDomain {
  if (line === null) return "cloudplane";
  const { httpMethod, target } = line;
  const q = target.indexOf("?");
  const path = q < 0 ? target : target.slice(0, q);
  const rpc = routes.methods.byPath(path);
  if (rpc !== undefined) return rpc.policy.domain;
  const found = routes.lookup(httpMethod.toUpperCase(), path);
  if (found.kind === "found") return found.route.entry.policy.domain;
  if (found.kind === "method_not_allowed") return found.entry.policy.domain;
  return "cloudplane";
}
