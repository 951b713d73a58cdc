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
  // Answers one connection may hold unsent (src/transport/unsent-output.ts).
  maxUnsentOutputBytes: number;
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
    // Checked by the server's request listener (src/transport/rest/request-target.ts), which answers a missing Host
    // with the JSON refusal every REST answer is, not Node's empty 400.
    requireHostHeader: false,
  };
}

// Applies the same timeouts to a server that speaks HTTP/1.1 through http2's allowHTTP1 (TLS with ALPN), which
// ignores them as options and reads them as properties (the interval when it starts listening).
export function applyHttp1Limits(server: http2.Http2SecureServer, limits: ConnectionLimits): void {
  Object.assign(server, { ...http1Options(limits), maxConnections: limits.maxConnections });
}

// The streams of each HTTP/2 session that stay open by design (health watches, streaming reflection): a session is
// not idle while one is open, though no frame may pass for long (a watch writes only when a status changes, and
// one without a deadline was dropped after the idle timeout and a request timeout, 90 s: a probe, 2026-11-27).
// Counted only for those streams, so that the calls of the hot path add nothing.
const openLongLived = new WeakMap<http2.Http2Session, number>();

function longLivedClosed(this: http2.ServerHttp2Stream, session: http2.Http2Session): void {
  const open = (openLongLived.get(session) ?? 1) - 1;
  if (open > 0) openLongLived.set(session, open);
  else openLongLived.delete(session);
}

export function holdSessionOpen(stream: http2.ServerHttp2Stream): void {
  const session = stream.session;
  if (session === undefined || stream.closed) return;
  openLongLived.set(session, (openLongLived.get(session) ?? 0) + 1);
  stream.once("close", longLivedClosed.bind(stream, session));
}

// An HTTP/2 session with no frames for the idle timeout, and no stream open by design, gets a GOAWAY: calls in
// flight finish, no new ones start. One that still has not closed after a further request timeout is dropped. A
// session kept for its open watch is looked at again after its next frame (the watch's last one, at the latest),
// which restarts Node's timer.
export function closeWhenIdle(session: http2.Http2Session, limits: ConnectionLimits): void {
  session.setTimeout(limits.idleTimeoutMs, () => {
    if (session.closed || session.destroyed) return;
    if (openLongLived.has(session)) return;
    session.close();
    setTimeout(() => session.destroy(), limits.requestTimeoutMs).unref();
  });
}
