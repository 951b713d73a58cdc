import net from "node:net";
import type http from "node:http";
import type http2 from "node:http2";

// Every h2c connection starts with this preface; no HTTP/1.x request line can (PRI is not a method).
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

export interface ListenerOptions {
  // A connection must have shown which protocol it speaks within this time, counted from its start and not reset
  // by each byte: a client dripping the preface one byte at a time is dropped all the same.
  firstBytesTimeoutMs: number;
  maxConnections: number;
}

// One cleartext port for HTTP/1.1 and h2c (prior knowledge): the first bytes of each connection decide which
// server gets it. Node's own allowHTTP1 only works with TLS, where ALPN makes this choice instead.
export function createCleartextListener(
  h1: http.Server,
  h2: http2.Http2Server,
  sockets: Set<net.Socket>,
  options: ListenerOptions,
): net.Server {
  // Nagle's algorithm off, as Node's http server has it on the connections it accepts itself (its noDelay default;
  // HTTP/2 sessions turn it off on their own): these connections are accepted here and only handed over, so
  // HTTP/1.1 ones kept it on. A response written in more than one piece could then wait for the client's delayed
  // ACK.
  const server = net.createServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    const deadline = setTimeout(() => socket.destroy(), options.firstBytesTimeoutMs);
    let seen: Buffer = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
      const n = Math.min(seen.length, H2_PREFACE.length);
      const looksH2 = seen.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      if (looksH2 && n < H2_PREFACE.length) return; // wait: not enough bytes to tell yet
      clearTimeout(deadline);
      socket.off("data", onData);
      socket.pause();
      socket.unshift(seen);
      // The socket may have closed while its bytes were read; a server that takes it over would throw.
      if (socket.destroyed) return;
      try {
        if (looksH2) {
          // The HTTP/2 session takes over the socket's handle and reads the unshifted bytes itself.
          h2.emit("connection", socket);
        } else {
          // The HTTP/1.1 parser reads through the stream API and would wait forever on a paused socket.
          h1.emit("connection", socket);
          socket.resume();
        }
      } catch {
        socket.destroy();
      }
    };
    socket.on("data", onData);
    socket.once("close", () => clearTimeout(deadline));
  });
  server.maxConnections = options.maxConnections;
  return server;
}
