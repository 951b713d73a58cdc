import type { IncomingHttpHeaders } from "node:http";

// Which headers cross the boundary between the REST request/response and the in-process Connect call.

// Hop-by-hop headers (RFC 9110 section 7.6.1) describe one connection and never travel further; HTTP/2 forbids
// them outright.
const hopByHop = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "http2-settings",
]);

// The REST body's framing and encoding, and the inner call's own protocol headers, which the transport sets.
const requestOnly = new Set(["host", "content-type", "content-length", "content-encoding", "accept-encoding"]);
const responseOnly = new Set(["content-type", "content-length", "content-encoding", "accept-encoding"]);

function isProtocolHeader(name: string): boolean {
  return name.startsWith("connect-") || name.startsWith("grpc-");
}

// The caller's headers (credentials, x-request-id, user-agent ...) as the in-process call's request headers.
// Of the protocol headers, only the caller's deadline: the one timeout header the deadline stage reads on the
// direct path (grpc-timeout when sent, else connect-timeout-ms), as it was sent, so that a REST call is held to
// the same deadline, and refused for the same invalid timeout, on both paths. Connect reads a connect-timeout-ms
// itself (and refuses an invalid one as the stage would, connect-refusals.ts); grpc-timeout it leaves to the stage.
export function forwardRequestHeaders(incoming: IncomingHttpHeaders): Headers {
  const headers = new Headers();
  const timeoutHeader = incoming["grpc-timeout"] !== undefined ? "grpc-timeout" : "connect-timeout-ms";
  for (const [name, value] of Object.entries(incoming)) {
    const lower = name.toLowerCase();
    if (value === undefined || lower.startsWith(":") || hopByHop.has(lower) || requestOnly.has(lower)) continue;
    if (isProtocolHeader(lower) && lower !== timeoutHeader) continue;
    // The first value, as the deadline stage reads it (NodeHeaders).
    for (const v of Array.isArray(value) ? (lower === timeoutHeader ? value.slice(0, 1) : value) : [value]) {
      try {
        headers.append(lower, v);
      } catch {
        // A value Node accepted but the Fetch Headers class does not; the call works without it.
      }
    }
  }
  return headers;
}

// Headers and trailers a handler set (x-request-id, retry-after, x-ratelimit-*), merged for the REST response,
// which has no trailers of its own. Multiple values of one name are kept.
export function responseHeadersOf(...sources: Headers[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const source of sources) {
    source.forEach((value, name) => {
      if (hopByHop.has(name) || responseOnly.has(name) || isProtocolHeader(name)) return;
      const values = out.get(name);
      if (values === undefined) out.set(name, [value]);
      else values.push(value);
    });
  }
  return out;
}
