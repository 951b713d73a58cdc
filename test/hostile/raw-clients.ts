import http2 from "node:http2";
import net from "node:net";
import { adminAuth } from "../support/credentials.js";
import { H2_PREFACE, h2Frame, hpackLiteral, hpackNamed } from "../support/h2-frames.js";

// Clients that misbehave on purpose, each bounded in time, and each reporting what the server did to it. They call
// as the server's admin (test/support/credentials.ts), so that what the server does to a call is the attack's
// doing and not a refusal of missing credentials; connections that never get as far as a request need none.


export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

// An HTTP/2 session whose errors are expected and ignored (the server may reset or drop it).
export function session(url: string, options: http2.ClientSessionOptions = {}): http2.ClientHttp2Session {
  const s = http2.connect(url, options);
  s.on("error", () => {});
  return s;
}

export interface StreamOutcome {
  // When the server ended or reset the stream, in ms from the start; null if it was still open at the end.
  closedAtMs: number | null;
  status?: string;
  grpcStatus?: string;
  rstCode?: number;
}

// Opens a stream, writes `body` without ending it, and records what the server does with it.
export function openStream(s: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body: Buffer, started: number): { outcome: StreamOutcome; stream: http2.ClientHttp2Stream } {
  const outcome: StreamOutcome = { closedAtMs: null };
  const stream = s.request(headers);
  stream.on("response", (h) => {
    outcome.status = String(h[":status"]);
    if (h["grpc-status"] !== undefined) outcome.grpcStatus = String(h["grpc-status"]);
  });
  stream.on("trailers", (t) => (outcome.grpcStatus = String(t["grpc-status"])));
  stream.on("data", () => {});
  stream.on("error", () => {});
  stream.on("close", () => {
    outcome.closedAtMs = performance.now() - started;
    outcome.rstCode = stream.rstCode;
  });
  if (body.length > 0) stream.write(body);
  return { outcome, stream };
}

export interface SocketOutcome {
  closedAtMs: number | null;
  received: string;
}

// A raw TCP connection that sends `first`, then `drip` one byte every `dripMs`, and records when the server
// closes it and what it answered.
export function rawConnection(port: number, first: Buffer, drip: Buffer, dripMs: number, started: number): { outcome: SocketOutcome; socket: net.Socket } {
  const outcome: SocketOutcome = { closedAtMs: null, received: "" };
  const socket = net.connect(port, "127.0.0.1");
  let at = 0;
  const timer = drip.length === 0 ? undefined : setInterval(() => {
    if (at < drip.length && !socket.destroyed) socket.write(drip.subarray(at, ++at));
  }, dripMs);
  socket.on("connect", () => {
    if (first.length > 0) socket.write(first);
  });
  socket.on("data", (d: Buffer) => (outcome.received += d.toString("latin1")));
  socket.on("error", () => {});
  socket.on("close", () => {
    clearInterval(timer);
    outcome.closedAtMs = performance.now() - started;
  });
  return { outcome, socket };
}

// Waits until every outcome has closed or `withinMs` passed.
export async function untilClosed(outcomes: { closedAtMs: number | null }[], withinMs: number): Promise<void> {
  const deadline = performance.now() + withinMs;
  while (outcomes.some((o) => o.closedAtMs === null) && performance.now() < deadline) await sleep(50);
}

// A gRPC call's headers, with the admin's token of the server at `url`.
export function grpcHeaders(url: string, path: string): http2.OutgoingHttpHeaders {
  return { ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...adminAuth(url) };
}

// The rapid reset a client library makes: 64 streams at a time, `streams` at most, each sending the first 4 bytes
// of a body and cancelled 1 ms later. Resolves with the GOAWAY error code the server sent, or null when it sent
// none before `waitMs` passed.
export function resetAfterBody(port: number, path: string, streams: number, waitMs: number, authorization: string): Promise<number | null> {
  return new Promise((resolve) => {
    const client = http2.connect(`http://127.0.0.1:${port}`);
    let goaway: number | null = null;
    client.on("error", () => {});
    client.on("goaway", (code: number) => (goaway ??= code));
    let opened = 0;
    let open = 0;
    const more = (): void => {
      while (open < 64 && opened < streams && !client.destroyed && goaway === null) {
        opened++;
        open++;
        const stream = client.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", authorization });
        stream.on("error", () => {});
        stream.resume();
        stream.on("close", () => {
          open--;
          setImmediate(more);
        });
        stream.write(Buffer.from([0, 0, 0, 1]));
        setTimeout(() => stream.close(http2.constants.NGHTTP2_CANCEL), 1);
      }
    };
    more();
    const done = (): void => {
      clearTimeout(timer);
      client.destroy();
      resolve(goaway);
    };
    const timer = setTimeout(done, waitMs);
    client.once("close", done);
  });
}

// One request's HEADERS followed by `pings` PINGs, all in the connection's first write, by a client that never reads:
// Node closes such a session for flooding before it announces the request's stream. Resolves once the server has
// closed the connection, or after `waitMs`.
export function requestThenPingFlood(port: number, path: string, pings: number, waitMs: number): Promise<void> {
  const headers = Buffer.concat([
    Buffer.from([0x82, 0x86]), // :method GET, :scheme http
    hpackLiteral([0x04], path), // :path
    hpackLiteral([0x01], "127.0.0.1"), // :authority
  ]);
  const ping = h2Frame(0x6, 0, 0, Buffer.alloc(8));
  const frames = [H2_PREFACE, h2Frame(0x4, 0, 0, Buffer.alloc(0)), h2Frame(0x1, 0x5, 1, headers), ...Array<Buffer>(pings).fill(ping)];
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write(Buffer.concat(frames)));
    socket.pause();
    socket.on("error", () => {});
    const done = (): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve();
    };
    const timer = setTimeout(done, waitMs);
    socket.once("close", done);
  });
}

// A gRPC call refused on its head (an invalid grpc-timeout), on a session whose client holds the window at 0 so that
// the refusal's end never goes out, then reset by the client with `code` (INTERNAL_ERROR by default). Resolves after
// `waitMs`, once Node has had time to destroy the stream.
export function refusedThenReset(port: number, authorization: string, waitMs: number, code = 0x2): Promise<void> {
  const headers = Buffer.concat([
    Buffer.from([0x83, 0x86]), // :method POST, :scheme http
    hpackLiteral([0x04], "/kms.v1.KeyManagerService/Encrypt"), // :path
    hpackLiteral([0x01], "127.0.0.1"), // :authority
    hpackLiteral([0x0f, 0x10], "application/grpc"), // content-type
    hpackLiteral([0x0f, 0x08], authorization), // authorization
    hpackNamed("grpc-timeout", "bogus"),
  ]);
  const windowZero = Buffer.from([0x00, 0x04, 0, 0, 0, 0]); // SETTINGS_INITIAL_WINDOW_SIZE = 0
  const reset = Buffer.alloc(4);
  reset.writeUInt32BE(code);
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1", () => {
      socket.write(Buffer.concat([H2_PREFACE, h2Frame(0x4, 0, 0, windowZero), h2Frame(0x4, 0x1, 0, Buffer.alloc(0)), h2Frame(0x1, 0x4, 1, headers)]));
      setTimeout(() => socket.write(h2Frame(0x3, 0, 1, reset)), 300);
    });
    socket.on("error", () => {});
    socket.on("data", () => {});
    setTimeout(() => {
      socket.destroy();
      resolve();
    }, waitMs);
  });
}

// Rapid reset (CVE-2023-44487) with raw frames, as an attacker sends it: each stream's HEADERS (without
// END_STREAM) directly followed by its RST_STREAM(CANCEL), all in one write. Node's own client cannot do this
// (it ends a stream before resetting it). Resolves with the error code of the first GOAWAY the server sent, once
// it has come (the server gives its peer a second to read it before it closes the connection, as a client told
// ENHANCE_YOUR_CALM closes it itself), or null once the server closed the connection or `waitMs` passed.
// `authorization`: the value of that header on every stream.
export function rapidReset(port: number, path: string, streams: number, waitMs: number, authorization: string, code = 0x8): Promise<number | null> {
  const headers = Buffer.concat([
    Buffer.from([0x83, 0x86]), // :method POST, :scheme http
    hpackLiteral([0x04], path), // :path
    hpackLiteral([0x01], "127.0.0.1"), // :authority
    hpackLiteral([0x0f, 0x10], "application/grpc"), // content-type
    hpackLiteral([0x0f, 0x08], authorization), // authorization (static table index 23)
  ]);
  const cancel = Buffer.alloc(4);
  cancel.writeUInt32BE(code);
  const frames = [H2_PREFACE, h2Frame(0x4, 0, 0, Buffer.alloc(0))];
  for (let i = 0; i < streams; i++) {
    frames.push(h2Frame(0x1, 0x4, 2 * i + 1, headers), h2Frame(0x3, 0, 2 * i + 1, cancel));
  }
  return new Promise((resolve) => {
    let received = Buffer.alloc(0);
    const socket = net.connect(port, "127.0.0.1", () => socket.write(Buffer.concat(frames)));
    socket.on("error", () => {});
    const firstGoaway = (): number | null => {
      for (let at = 0; at + 9 <= received.length; at += 9 + received.readUIntBE(at, 3)) {
        if (received[at + 3] === 0x7 && at + 17 <= received.length) return received.readUInt32BE(at + 13);
      }
      return null;
    };
    const done = (): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(firstGoaway());
    };
    socket.on("data", (d: Buffer) => {
      received = Buffer.concat([received, d]);
      if (firstGoaway() !== null) done();
    });
    const timer = setTimeout(done, waitMs);
    socket.once("close", done);
  });
}
