import type http from "node:http";
import type http2 from "node:http2";
import type net from "node:net";
import type { Logger } from "pino";

// Answers a connection holds unsent, whatever the protocol (docs/robustness.md, "Answers nobody reads"). A client
// that asks for large answers and reads none of them made the server hold them all: 128 HTTP/2 streams of 3.4 MB
// lists with a zero window pinned 900 MB, for minutes (a probe of 82d22ee). Written once, for connections, not in
// each protocol adapter: REST, Connect, gRPC-web, the direct gRPC adapter and the XML surface all write through
// the same sockets and streams.
//
// What reflects the unsent bytes (measured on Node 20.20, docs/robustness.md):
// - HTTP/2: each stream's `writableLength`, which counts a write until all of it is sent (an answer written in one
//   piece counts whole until its last byte goes, which is also how long its buffer is held). Neither
//   `session.state` (`outboundQueueSize` counts frames nghttp2 has ready, 0 while a window is closed) nor the
//   session's socket (`writableLength` 0: nghttp2 writes to the handle) shows them. The streams of a session are
//   Node's own map of them, read here at each check, so that a call pays nothing for this.
// - HTTP/1.1: the socket's `writableLength`. Answers waiting behind it hold nothing, since a pipelined request is
//   served only in its turn (pipelined-requests.ts).
// Progress is the socket's `bytesWritten` (the session's socket for HTTP/2), which counts what the kernel took.

export interface UnsentOutputLimits {
  maxUnsentOutputBytes: number;
  idleTimeoutMs: number;
}

// How often every connection is looked at: one timer for the server, not one per call. A connection can run past
// the bound by what its calls write in this time.
export const CHECK_INTERVAL_MS = 250;

// At most this many connections closed are logged one by one a minute; the rest are counted in the next line.
const MAX_NOTICES_PER_MINUTE = 10;

interface Progress {
  written: number;
  since: number;
}

// Node keeps the streams of a session in a map under a symbol of its own (`kState`), which no API exposes. The map
// is one of Node's internal SafeMaps, which is no `instanceof Map` here.
let streamsKey: symbol | null | undefined;

function streamsOf(session: http2.Http2Session): Map<number, http2.Http2Stream> | undefined {
  const s = session as unknown as Record<symbol, { streams?: Map<number, http2.Http2Stream> } | undefined>;
  if (streamsKey === undefined) {
    streamsKey = Object.getOwnPropertySymbols(session).find((k) => k.description === "state" && Object.prototype.toString.call(s[k]?.streams) === "[object Map]") ?? null;
  }
  return streamsKey === null ? undefined : s[streamsKey]?.streams;
}

// The unsent bytes of an HTTP/2 session's answers.
export function sessionUnsentBytes(session: http2.Http2Session): number {
  const streams = streamsOf(session);
  if (streams === undefined) return 0;
  let bytes = 0;
  for (const stream of streams.values()) bytes += stream.writableLength;
  return bytes;
}

export class UnsentOutput {
  private readonly sockets = new Set<net.Socket>();
  private readonly sessions = new Set<http2.Http2Session>();
  // Only connections that held unsent bytes at the last check.
  private readonly progress = new Map<net.Socket | http2.Http2Session, Progress>();
  private timer: NodeJS.Timeout | null = null;
  private notices = { windowStart: 0, count: 0, unlogged: 0 };
  private warnedNoStreams = false;

  constructor(
    private readonly limits: UnsentOutputLimits,
    private readonly logger: Logger,
  ) {}

  // Every HTTP/1.1 connection of `server` (cleartext: the sockets it is handed) is watched until it closes.
  watchHttp1(server: http.Server): void {
    server.on("connection", (socket: net.Socket) => this.watchSocket(socket));
  }

  // The HTTP/1.1 connections of a TLS server that serves both protocols (allowHTTP1): those ALPN did not make h2.
  watchHttp1OverTls(server: net.Server): void {
    server.on("secureConnection", (socket: net.Socket & { alpnProtocol?: string | false }) => {
      if (socket.alpnProtocol !== "h2") this.watchSocket(socket);
    });
  }

  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => this.check(), CHECK_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  private watchSocket(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once("close", () => {
      this.sockets.delete(socket);
      this.progress.delete(socket);
    });
  }

  // Watched until it closes; the server's "session" listener calls this for every HTTP/2 session.
  watchSession(session: http2.Http2Session): void {
    if (streamsOf(session) === undefined && !this.warnedNoStreams) {
      this.warnedNoStreams = true;
      this.logger.warn("this Node version keeps the streams of an HTTP/2 session elsewhere: the unsent answers of HTTP/2 connections are not bounded");
    }
    this.sessions.add(session);
    session.once("close", () => {
      this.sessions.delete(session);
      this.progress.delete(session);
    });
  }

  // Exposed for tests; called by the timer.
  check(now = performance.now()): void {
    for (const socket of this.sockets) {
      if (socket.destroyed) continue;
      const unsent = socket.writableLength;
      if (unsent === 0) {
        if (this.progress.size > 0) this.progress.delete(socket);
        continue;
      }
      if (this.overBound(socket, unsent, socket.bytesWritten, now)) this.close(socket, socket, unsent, now);
    }
    for (const session of this.sessions) {
      if (session.destroyed) continue;
      const unsent = sessionUnsentBytes(session);
      if (unsent === 0) {
        if (this.progress.size > 0) this.progress.delete(session);
        continue;
      }
      const socket = session.socket;
      if (this.overBound(session, unsent, socket?.bytesWritten ?? 0, now)) this.close(session, socket, unsent, now);
    }
  }

  // Over the bound: more unsent bytes than the setting, or unsent bytes and nothing sent for the idle timeout.
  private overBound(conn: net.Socket | http2.Http2Session, unsent: number, written: number, now: number): boolean {
    if (unsent > this.limits.maxUnsentOutputBytes) return true;
    const seen = this.progress.get(conn);
    if (seen === undefined || seen.written !== written) {
      this.progress.set(conn, { written, since: now });
      return false;
    }
    return now - seen.since >= this.limits.idleTimeoutMs;
  }

  private close(conn: net.Socket | http2.Http2Session, socket: net.Socket | undefined, unsent: number, now: number): void {
    const stalled = unsent <= this.limits.maxUnsentOutputBytes;
    const peer = socket === undefined ? "unknown" : `${socket.remoteAddress ?? "unknown"}:${socket.remotePort ?? 0}`;
    this.progress.delete(conn);
    conn.destroy();
    this.report(peer, unsent, stalled, now);
  }

  private report(peer: string, unsent: number, stalled: boolean, now: number): void {
    const n = this.notices;
    if (now - n.windowStart >= 60_000) {
      n.windowStart = now;
      n.count = 0;
    }
    if (n.count >= MAX_NOTICES_PER_MINUTE) {
      n.unlogged++;
      return;
    }
    n.count++;
    const unlogged = n.unlogged;
    n.unlogged = 0;
    const why = stalled
      ? `sent nothing of its ${unsent} unsent bytes of answers for ${this.limits.idleTimeoutMs / 1000} s (the idle timeout)`
      : `held ${unsent} bytes of answers unsent, over MAX_UNSENT_OUTPUT_BYTES (${this.limits.maxUnsentOutputBytes})`;
    this.logger.warn(
      { peer, unsentBytes: unsent, ...(unlogged > 0 ? { unloggedClosesBefore: unlogged } : {}) },
      `closed the connection of ${peer}: it ${why}`,
    );
  }
}
