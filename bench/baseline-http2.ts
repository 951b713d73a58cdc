import http2 from "node:http2";
import type { ServerHttp2Stream } from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import {
  DecryptRequestSchema,
  DecryptResponseSchema,
  EncryptRequestSchema,
  EncryptResponseSchema,
} from "../gen/kms/v1/kms_pb.js";
import { ciphertextVersion, open, seal } from "../src/kms/ciphertext.js";
import { baselineKeys, baselinePort } from "./baseline-key.js";

// Baseline 2: a bare node:http2 server that speaks just enough gRPC for unary Encrypt and Decrypt, by hand: one
// length-prefixed message in, protobuf-es decode, the same AES-256-GCM seal/open as cloudplane, protobuf-es encode,
// headers, one framed message, trailers. Flow-control windows as cloudplane sets them (1 MiB per stream, 16 MiB per
// connection), so the 64 KiB case compares handlers, not window settings. This is the ceiling a Node server can
// reach with this work per call; cloudplane must reach 85% of it.

const ENCRYPT = "/kms.v1.KeyManagerService/Encrypt";
const DECRYPT = "/kms.v1.KeyManagerService/Decrypt";
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

const keys = baselineKeys(process.env);

// Errors go out trailers-only, as gRPC servers answer a call that fails before any message.
function fail(stream: ServerHttp2Stream, code: number, message: string): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond(
    { ":status": 200, "content-type": "application/grpc", "grpc-status": String(code), "grpc-message": encodeURIComponent(message) },
    { endStream: true },
  );
}

function reply(stream: ServerHttp2Stream, message: Uint8Array): void {
  if (stream.destroyed) return;
  const frame = Buffer.allocUnsafe(5 + message.length);
  frame[0] = 0;
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
  stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
  stream.end(frame);
}

// The single message of a unary call, or null when the body is not exactly one uncompressed frame.
function unframe(body: Buffer): Buffer | null {
  if (body.length < 5 || body[0] !== 0) return null;
  const length = body.readUInt32BE(1);
  return body.length === 5 + length ? body.subarray(5) : null;
}

function decode<Desc extends DescMessage>(stream: ServerHttp2Stream, schema: Desc, body: Buffer): MessageShape<Desc> | null {
  const message = unframe(body);
  if (message === null) {
    fail(stream, 3, "request must be one uncompressed gRPC message");
    return null;
  }
  try {
    return fromBinary(schema, message);
  } catch {
    fail(stream, 3, "cannot decode the request");
    return null;
  }
}

function encrypt(stream: ServerHttp2Stream, body: Buffer): void {
  const req = decode(stream, EncryptRequestSchema, body);
  if (req === null) return;
  const key = keys.get(req.keyId);
  if (key === undefined || req.keyVersionId !== key.versionId) return fail(stream, 5, "key version not found");
  if (req.plaintext.length === 0 || req.plaintext.length > 65536) return fail(stream, 3, "bad plaintext");
  const ciphertext = seal(key.key, req.plaintext, req.additionalAuthenticatedData);
  const res = create(EncryptResponseSchema, { keyId: req.keyId, keyVersionId: key.versionId, ciphertext });
  reply(stream, toBinary(EncryptResponseSchema, res));
}

function decrypt(stream: ServerHttp2Stream, body: Buffer): void {
  const req = decode(stream, DecryptRequestSchema, body);
  if (req === null) return;
  const key = keys.get(req.keyId);
  if (key === undefined) return fail(stream, 5, "key not found");
  const versionId = ciphertextVersion(req.ciphertext);
  if (versionId !== key.versionId) return fail(stream, 3, "invalid ciphertext");
  const plaintext = open(key.key, req.ciphertext, req.additionalAuthenticatedData);
  if (plaintext === null) return fail(stream, 3, "invalid ciphertext");
  const res = create(DecryptResponseSchema, { keyId: req.keyId, keyVersionId: versionId, plaintext });
  reply(stream, toBinary(DecryptResponseSchema, res));
}

const server = http2.createServer({ settings: { initialWindowSize: 1 << 20 } });
server.on("session", (session) => session.setLocalWindowSize(16 << 20));
server.on("stream", (stream, headers) => {
  stream.on("error", () => stream.destroy());
  const path = headers[":path"];
  const handle = path === ENCRYPT ? encrypt : path === DECRYPT ? decrypt : null;
  if (handle === null) return fail(stream, 12, `${String(path)} is not implemented`);
  let first: Buffer | null = null;
  let chunks: Buffer[] | null = null;
  let size = 0;
  stream.on("data", (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_MESSAGE_BYTES + 5) {
      fail(stream, 8, "request too large");
      stream.close(http2.constants.NGHTTP2_CANCEL);
      return;
    }
    if (first === null) first = chunk;
    else (chunks ??= [first]).push(chunk);
  });
  stream.on("end", () => {
    const body = chunks !== null ? Buffer.concat(chunks, size) : (first ?? Buffer.alloc(0));
    try {
      handle(stream, body);
    } catch {
      fail(stream, 13, "internal error");
    }
  });
});

server.listen(baselinePort(process.env), "127.0.0.1", () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ listening: typeof address === "object" && address !== null ? address.port : 0 })}\n`);
});

// A clean exit on SIGTERM, so that a --cpu-prof profile gets written.
process.on("SIGTERM", () => process.exit(0));
