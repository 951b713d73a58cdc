import type http from "node:http";
import type http2 from "node:http2";

// How long and how much a connection may take, whatever its protocol (docs/robustness.md). Each is a setting
// (src/config.ts) with a production default; tests set them short.
export interface ConnectionLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  idleTimeoutMs: number;
  maxConnections: number;
  http2MaxStreams: number;
}

// Node checks the header and request timeouts of its HTTP/1.1 connections on an interval (30 s by default, which
// would let a slowloris connection live up to 30 s past its timeout).
const CONNECTIONS_CHECK_MS = 1_000;

export function http1Options(limits: ConnectionLimits): http.ServerOptions {
  return {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.idleTimeoutMs,
    connectionsCheckingInterval: CONNECTIONS_CHECK_MS,
  };
}

// Applies the same timeouts to a server that speaks HTTP/1.1 through http2's allowHTTP1 (TLS with ALPN), which
// ignores them as options and reads them as properties (the interval when it starts listening).
export function applyHttp1Limits(server: http2.Http2SecureServer, limits: ConnectionLimits): void {
  Object.assign(server, { ...http1Options(limits), maxConnections: limits.maxConnections });
}

// An HTTP/2 session with no frames for the idle timeout gets a GOAWAY: calls in flight finish, no new ones
// start. One that still has not closed after a further request timeout is dropped.
export function closeWhenIdle(session: http2.Http2Session, limits: ConnectionLimits): void {
  session.setTimeout(limits.idleTimeoutMs, () => {
    if (session.closed || session.destroyed) return;
    session.close();
    setTimeout(() => session.destroy(), limits.requestTimeoutMs).unref();
  });
}
