import http from "node:http";
import http2 from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { DescMethod } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { HealthCheckRequestSchema, HealthCheckResponseSchema, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { EncryptRequestSchema, EncryptResponseSchema, KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { apiServices, infrastructureServices } from "../../src/routes.js";
import { adminAuth } from "../support/credentials.js";
import { frame } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { frames, fromBase64Segments, trailerFrame, wireCall } from "../support/wire-call.js";
import type { WireAnswer } from "../support/wire-call.js";

// gRPC-web's text form (application/grpc-web-text, the default mode of the grpc-web JavaScript client): the binary
// form's envelopes in base64, both ways. The server answers it exactly as it answers the binary form, in base64.

const encrypt = KeyManagerService.method.encrypt;
const decrypt = KeyManagerService.method.decrypt;
const unary = [...apiServices, ...infrastructureServices].flatMap((s) => s.methods).filter((m) => m.methodKind === "unary");

// What must be the same whichever form served the call: everything but the headers that name the form, the
// request id (a new one per call), the caller's remaining rate-limit budget (one call less each time) and the
// transport's own.
function comparable(answer: WireAnswer): WireAnswer {
  const {
    "content-type": _type,
    "x-request-id": _id,
    "x-ratelimit-remaining": _remaining,
    date: _date,
    "content-length": _length,
    connection: _c,
    "keep-alive": _k,
    "transfer-encoding": _t,
    vary: _v,
    ...headers
  } = answer.headers;
  return { ...answer, headers };
}

interface TextAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  // The body as it came, and decoded.
  text: string;
  frames: [number, Buffer][];
  trailer: Record<string, string>;
}

// The status of a gRPC-web body's trailer frame; empty when it has none.
function trailerOf(body: [number, Buffer][]): Record<string, string> {
  const trailer = body.find(([flags]) => (flags & 0x80) !== 0);
  return trailer === undefined ? {} : trailerFrame(trailer[1]);
}

// A text call over HTTP/1.1 whose body is written in the given pieces, one write each (chunked).
function textCall(url: string, method: DescMethod, pieces: string[], headers: Record<string, string> = adminAuth(url)): Promise<TextAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/${method.parent.typeName}/${method.name}`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web-text", accept: "application/grpc-web-text", "x-grpc-web": "1", ...headers },
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("latin1");
        const answerFrames = res.statusCode === 200 ? frames(fromBase64Segments(text)) : [];
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, frames: answerFrames, trailer: trailerOf(answerFrames) });
      });
    });
    req.on("error", reject);
    (async () => {
      for (const piece of pieces) {
        req.write(piece);
        // Apart, so that the server reads them as separate chunks.
        await new Promise((r) => setTimeout(r, 2));
      }
      req.end();
    })().catch(reject);
  });
}

function errorInfo(answer: TextAnswer): { reason: string; domain: string } {
  const bin = answer.trailer["grpc-status-details-bin"];
  if (bin === undefined) throw new Error(`no grpc-status-details-bin in ${JSON.stringify(answer.trailer)}`);
  const [info] = fromBinary(StatusSchema, Buffer.from(bin, "base64")).details.filter((d) => d.typeUrl.endsWith("google.rpc.ErrorInfo"));
  const decoded = fromBinary(ErrorInfoSchema, info!.value);
  return { reason: decoded.reason, domain: decoded.domain };
}

describe("gRPC-web's text form", () => {
  let server: TestServer;
  let keyId = "";

  beforeAll(async () => {
    server = await startServer();
    const res = await fetch(`${server.url}/v1/keys`, {
      method: "POST",
      headers: { "content-type": "application/json", ...adminAuth(server.url) },
      body: JSON.stringify({ parentId: "web-text" }),
    });
    keyId = ((await res.json()) as { id: string }).id;
  });
  afterAll(() => server.stop());

  async function keyCount(): Promise<number> {
    const res = await fetch(`${server.url}/v1/keys?parentId=web-text`, { headers: adminAuth(server.url) });
    return ((await res.json()) as { keys?: unknown[] }).keys?.length ?? 0;
  }

  it("encrypts, and the ciphertext decrypts over gRPC, with each frame of the answer its own padded base64", async () => {
    const request = create(EncryptRequestSchema, { keyId, keyVersionId: 1, plaintext: new TextEncoder().encode("hello, text"), additionalAuthenticatedData: new Uint8Array([1, 2]) });
    const answer = await textCall(server.url, encrypt, [frame(toBinary(EncryptRequestSchema, request)).toString("base64")]);
    expect(answer.status).toBe(200);
    expect(answer.headers["content-type"]).toBe("application/grpc-web-text+proto");
    expect(answer.frames.map(([flags]) => flags)).toEqual([0x00, 0x80]);
    expect(answer.trailer["grpc-status"]).toBe("0");
    // Two segments: the message frame's base64 and the trailer frame's, each whole (padded when it needs to be).
    const messageFrame = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), answer.frames[0]![1]]);
    messageFrame.writeUInt32BE(answer.frames[0]![1].length, 1);
    expect(answer.text.startsWith(messageFrame.toString("base64"))).toBe(true);
    const sealed = fromBinary(EncryptResponseSchema, answer.frames[0]![1]);
    expect(sealed.keyVersionId).toBe(1);
    const opened = await wireCall(server.url, "grpc", decrypt, { keyId, ciphertext: sealed.ciphertext, additionalAuthenticatedData: new Uint8Array([1, 2]) }, adminAuth(server.url));
    expect(opened.code).toBe(0);
    expect(Buffer.from((opened.response as { plaintext: string }).plaintext, "base64").toString()).toBe("hello, text");
  });

  it("reads base64 cut anywhere into chunks, and padded segments one after the other", async () => {
    const message = toBinary(EncryptRequestSchema, create(EncryptRequestSchema, { keyId, keyVersionId: 1, plaintext: new Uint8Array(50).fill(7) }));
    const whole = frame(message).toString("base64");
    // One character at a time for the first ten, then pieces of 2, 3 and 5.
    const pieces = [...whole.slice(0, 10)];
    for (let at = 10, size = 2; at < whole.length; at += size, size = size === 5 ? 2 : size + 1) pieces.push(whole.slice(at, at + size));
    const cut = await textCall(server.url, encrypt, pieces);
    expect(cut.trailer["grpc-status"]).toBe("0");
    // The envelope's bytes split at 4, 7 and 31, each part base64 of its own with its padding.
    const bytes = frame(message);
    const segments = [bytes.subarray(0, 4), bytes.subarray(4, 7), bytes.subarray(7, 31), bytes.subarray(31)].map((b) => b.toString("base64"));
    expect(segments.some((s) => s.includes("="))).toBe(true);
    const padded = await textCall(server.url, encrypt, segments);
    expect(padded.trailer["grpc-status"]).toBe("0");
  });

  it.each(unary.map((m) => [`${m.parent.typeName}/${m.name}`, m] as const))("answers %s as the binary form does", async (_name, method) => {
    // The empty request: for most methods a refusal by validation, after the whole pipeline ran.
    const binary = await wireCall(server.url, "grpc-web", method, {}, adminAuth(server.url));
    const text = await wireCall(server.url, "grpc-web-text", method, {}, adminAuth(server.url));
    expect(comparable(text)).toEqual(comparable(binary));
  });

  it("answers a refusal of the pipeline, an unknown key and a failed decryption as the binary form does", async () => {
    const cases: [DescMethod, object, Record<string, string>][] = [
      [encrypt, { keyId, keyVersionId: 1, plaintext: new Uint8Array([1]) }, {}],
      [encrypt, { keyId: "no-such-key", keyVersionId: 1, plaintext: new Uint8Array([1]) }, adminAuth(server.url)],
      [decrypt, { keyId, ciphertext: new Uint8Array(40).fill(9) }, adminAuth(server.url)],
    ];
    for (const [method, request, headers] of cases) {
      const binary = await wireCall(server.url, "grpc-web", method as typeof encrypt, request as never, headers);
      const text = await wireCall(server.url, "grpc-web-text", method as typeof encrypt, request as never, headers);
      expect(binary.code).not.toBe(0);
      expect(comparable(text)).toEqual(comparable(binary));
    }
  });

  it.each([
    ["a character outside the alphabet", (b64: string) => `${b64.slice(0, 8)}!${b64.slice(9)}`],
    ["a line break", (b64: string) => `${b64.slice(0, 8)}\n${b64.slice(8, -1)}`],
    ["padding in the second place of a group", (b64: string) => `A===${b64}`],
    ["padding followed by a letter in its group", (b64: string) => `AA=A${b64}`],
    ["a body that ends inside a group", (b64: string) => `${b64}AB`],
    ["the binary form sent as text", (b64: string) => Buffer.from(b64, "base64").toString("latin1")],
  ])("refuses %s with MALFORMED_BODY, and stores nothing", async (_name, spoil) => {
    const before = await keyCount();
    const createKey = KeyManagerService.method.createCryptoKey;
    const message = toBinary(createKey.input, create(createKey.input, { parentId: "web-text" }));
    const answer = await textCall(server.url, createKey, [spoil(frame(message).toString("base64"))]);
    expect(answer.status).toBe(200);
    expect(answer.headers["content-type"]).toBe("application/grpc-web-text+proto");
    expect(answer.trailer["grpc-status"]).toBe("3");
    expect(decodeURIComponent(answer.trailer["grpc-message"] ?? "")).toBe(
      "the request is not base64 (groups of four characters of A-Z a-z 0-9 + /, padded with =) of gRPC-web envelopes",
    );
    expect(errorInfo(answer)).toEqual({ reason: "MALFORMED_BODY", domain: "kms" });
    expect(await keyCount()).toBe(before);
  });

  it("refuses an envelope declared over the limit on its header, as the binary form does", async () => {
    const header = Buffer.from([0, 0, 0x50, 0, 0]); // 5 MiB declared, nothing after it
    const binary = await fetch(`${server.url}/${KeyManagerService.typeName}/Encrypt`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto", ...adminAuth(server.url) },
      body: new Uint8Array(header),
    });
    const binaryTrailer = trailerOf(frames(Buffer.from(await binary.arrayBuffer())));
    const text = await textCall(server.url, encrypt, [header.toString("base64")]);
    expect(text.trailer["grpc-status"]).toBe("8");
    expect(errorInfo(text)).toEqual({ reason: "REQUEST_TOO_LARGE", domain: "kms" });
    const { "grpc-status-details-bin": _b, ...shown } = text.trailer;
    const { "grpc-status-details-bin": _c, ...binaryShown } = binaryTrailer;
    expect(shown).toEqual(binaryShown);
  });

  it("streams: a health Watch over HTTP/2 sends its first message as a whole segment before the stream ends, and stops watching when the caller leaves", async () => {
    const KMS = "kms.v1.KeyManagerService";
    const session = http2.connect(server.url);
    try {
      const body = frame(toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema, { service: KMS }))).toString("base64");
      const first = await new Promise<{ type: string | undefined; message: Buffer }>((resolve, reject) => {
        const req = session.request({ ":method": "POST", ":path": "/grpc.health.v1.Health/Watch", "content-type": "application/grpc-web-text", "x-grpc-web": "1" });
        let type: string | undefined;
        let text = "";
        req.on("response", (h) => (type = h["content-type"]));
        req.on("data", (c: Buffer) => {
          text += c.toString("latin1");
          if (text.length % 4 === 0) resolve({ type, message: fromBase64Segments(text) });
        });
        req.on("error", reject);
        req.end(body);
      });
      expect(first.type).toBe("application/grpc-web-text+proto");
      const [message] = frames(first.message);
      expect(message![0]).toBe(0);
      expect(fromBinary(HealthCheckResponseSchema, message![1]).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
      expect(server.app.health.listenerCount(KMS)).toBe(1);
    } finally {
      session.destroy();
    }
    // The caller left: its watch ends, as in the binary form.
    await vi.waitFor(() => expect(server.app.health.listenerCount(KMS)).toBe(0), { timeout: 5000 });
  });
});
