import http2 from "node:http2";
import net from "node:net";

// Clients that misbehave on purpose, each bounded in time, and each reporting what the server did to it.

export const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

// An HTTP/2 session whose errors are expected and ignored (the server may reset or drop it).
export function session(url: string): http2.ClientHttp2Session {
  const s = http2.connect(url);
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

export function grpcHeaders(path: string): http2.OutgoingHttpHeaders {
  return { ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers" };
}
