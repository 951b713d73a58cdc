import http2 from "node:http2";
import { adminAuth } from "./credentials.js";

// gRPC with nothing between the test and the wire, so that exact headers and trailers can be compared.

export interface RawResponse {
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
  body: Buffer;
}

// One length-prefixed message: flag 0 (uncompressed), uint32 big-endian length, the bytes.
export function frame(message: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + message.length);
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

// One gRPC call on a session of its own. A trailers-only answer has its status in `headers`.
export function rawCall(url: string, path: string, body: Buffer, extra: http2.OutgoingHttpHeaders = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    const req = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...adminAuth(url), ...extra });
    let headers: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    req.on("response", (h) => (headers = h));
    req.on("trailers", (t) => (trailers = t));
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      session.close();
      resolve({ headers, trailers, body: Buffer.concat(chunks) });
    });
    req.on("error", reject);
    req.end(body);
  });
}

// What a gRPC call answered, headers and trailers together (a trailers-only answer has its status in the headers).
export interface GrpcOutcome {
  status: string | undefined;
  message: string | undefined;
  details: string | undefined;
  body: Buffer;
}

// One gRPC call on a session the caller holds, its body written in `parts`, each after a pause so that it arrives
// as a DATA frame (a chunk on the server) of its own; parts the server no longer reads (it answered first) are
// not written.
export async function callInParts(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, parts: Buffer[], pauseMs = 2): Promise<GrpcOutcome> {
  const req = session.request({ ":method": "POST", "content-type": "application/grpc", te: "trailers", ...headers });
  const outcome = new Promise<GrpcOutcome>((resolve, reject) => {
    let answer: http2.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    req.on("response", (h) => (answer = h));
    req.on("trailers", (t) => (answer = { ...answer, ...t }));
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("close", () =>
      resolve({
        status: answer["grpc-status"] as string | undefined,
        message: answer["grpc-message"] as string | undefined,
        details: answer["grpc-status-details-bin"] as string | undefined,
        body: Buffer.concat(chunks),
      }),
    );
    req.on("error", reject);
  });
  for (const part of parts.slice(0, -1)) {
    if (req.closed) break;
    req.write(part);
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  if (!req.closed) req.end(parts.at(-1));
  return outcome;
}
