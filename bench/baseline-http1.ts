import http from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import { seal } from "../src/kms/ciphertext.js";
import { baselineKeys, baselinePort } from "./baseline-key.js";

// Baseline 3: a bare node:http server with one JSON endpoint, POST /v1/encrypt, doing per call what cloudplane's
// REST surface must do for Encrypt and nothing else: read the body, JSON.parse it, base64-decode plaintext and
// additionalAuthenticatedData, the same AES-256-GCM seal with the key looked up in a Map, and a JSON answer
// {keyId, keyVersionId, ciphertext} with the ciphertext in base64. Node's defaults otherwise (keep-alive
// included), so it is what a hand-written Node endpoint costs; cloudplane's REST Encrypt over HTTP/1.1 must reach
// 0.8x its requests per second (routing from annotations, proto-JSON and the call pipeline cost the other 20%).

const ENCRYPT = "/v1/encrypt";
const MAX_BODY_BYTES = 4 * 1024 * 1024;
const MAX_PLAINTEXT_BYTES = 65536;

const keys = baselineKeys(process.env);

function answer(res: ServerResponse, status: number, body: object): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

// An error body shaped like a google.rpc.Status; the bench only ever sees the 200s.
function fail(res: ServerResponse, status: number, message: string): void {
  answer(res, status, { code: status === 404 ? 5 : 3, message });
}

// Proto-JSON bytes are base64 strings; an absent field is empty bytes.
function bytesOf(value: unknown): Buffer | null {
  if (value === undefined || value === null) return Buffer.alloc(0);
  return typeof value === "string" ? Buffer.from(value, "base64") : null;
}

function encrypt(res: ServerResponse, body: Buffer): void {
  let req: { keyId?: unknown; keyVersionId?: unknown; plaintext?: unknown; additionalAuthenticatedData?: unknown };
  try {
    req = JSON.parse(body.toString("utf8")) as typeof req;
  } catch {
    return fail(res, 400, "the body is not JSON");
  }
  if (typeof req !== "object" || req === null) return fail(res, 400, "the body is not a JSON object");
  const key = typeof req.keyId === "string" ? keys.get(req.keyId) : undefined;
  if (key === undefined || req.keyVersionId !== key.versionId) return fail(res, 404, "key version not found");
  const plaintext = bytesOf(req.plaintext);
  const aad = bytesOf(req.additionalAuthenticatedData);
  if (plaintext === null || plaintext.length === 0 || plaintext.length > MAX_PLAINTEXT_BYTES) return fail(res, 400, "bad plaintext");
  if (aad === null || aad.length > MAX_PLAINTEXT_BYTES) return fail(res, 400, "bad additionalAuthenticatedData");
  const sealed = seal(key.key, plaintext, aad);
  const ciphertext = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength).toString("base64");
  answer(res, 200, { keyId: key.id, keyVersionId: key.versionId, ciphertext });
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  if (req.method !== "POST" || req.url !== ENCRYPT) {
    req.resume();
    return fail(res, 404, `${String(req.method)} ${String(req.url)} is not served`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  req.on("data", (chunk: Buffer) => {
    size += chunk.length;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  });
  req.on("end", () => {
    if (size > MAX_BODY_BYTES) return fail(res, 413, "request too large");
    try {
      encrypt(res, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    } catch {
      answer(res, 500, { code: 13, message: "internal error" });
    }
  });
}

const server = http.createServer(handle);
server.listen(baselinePort(process.env), "127.0.0.1", () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ listening: typeof address === "object" && address !== null ? address.port : 0 })}\n`);
});

// A clean exit on SIGTERM, so that a --cpu-prof profile gets written.
process.on("SIGTERM", () => process.exit(0));
