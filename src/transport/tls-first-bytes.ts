import type http from "node:http";
import type http2 from "node:http2";
import type net from "node:net";
import type { TLSSocket } from "node:tls";

// The TLS port's first-bytes deadline, the one createCleartextListener (listener.ts) sets on the cleartext port: a
// connection must have finished its TLS handshake and shown its protocol (the whole HTTP/2 preface, or a whole
// HTTP/1.1 request head) within `timeoutMs` of its TCP connection, else it is dropped. Node's own bounds do not do
// this: its handshakeTimeout (120 s by default) is restarted by every byte, an h2 session without a preface is only
// closed by the idle timeout, and an HTTP/1.1 head's timeout starts after the handshake. Connections that sent
// nothing therefore held MAX_CONNECTIONS for minutes (a probe of 82d22ee: ten silent connections filled
// MAX_CONNECTIONS=10 for over 130 s).
export function limitTlsFirstBytes(server: http2.Http2SecureServer, timeoutMs: number): void {
  // What ends a connection still on its deadline: its TCP socket, until an HTTP/2 session owns it (destroying the
  // TCP socket under a session closes neither the session nor the peer's connection).
  const pending = new WeakMap<net.Socket, { deadline: NodeJS.Timeout; drop: () => void }>();
  server.on("connection", (socket: net.Socket) => {
    const entry = { deadline: setTimeout(() => entry.drop(), timeoutMs), drop: () => socket.destroy() };
    pending.set(socket, entry);
    socket.once("close", () => clearTimeout(entry.deadline));
  });
  // The TLS socket wraps the TCP socket the deadline was set on (its `_parent`, which Node has set since TLS
  // sockets wrap net sockets; test/e2e/tls-first-bytes.test.ts fails if it no longer does).
  const entryOf = (tls: TLSSocket) => {
    const tcp = (tls as TLSSocket & { _parent?: net.Socket | null })._parent;
    return tcp ? pending.get(tcp) : undefined;
  };
  server.on("session", (session: http2.ServerHttp2Session) => {
    const entry = entryOf(session.socket as TLSSocket);
    if (entry === undefined) return;
    entry.drop = () => session.destroy();
    // A client's SETTINGS frame follows its preface: Node announces it only once the preface was whole and right.
    session.once("remoteSettings", () => clearTimeout(entry.deadline));
  });
  // Emitted once a request's head is whole; HTTP/2 requests come on sessions already cleared above.
  server.on("request", (req: http.IncomingMessage | http2.Http2ServerRequest) => {
    if (req.httpVersionMajor === 1) clearTimeout(entryOf(req.socket as TLSSocket)?.deadline);
  });
}
