import http2 from "node:http2";
import { gzipSync } from "node:zlib";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EncryptRequestSchema, EncryptResponseSchema } from "../../gen/kms/v1/kms_pb.js";
import { adminAuth } from "../support/credentials.js";
import { frame, rawCall } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// No answer is compressed, on either call path (CI runs this file with CALL_PATH=connect too): connect-node
// compressed answers of 1 KiB or more to every caller that accepts gzip, and grpc-js and grpcio announce it by
// default, while the direct gRPC adapter never did (a probe, 2026-11-28). A Decrypt's answer carries plaintext, which
// compression beside caller-chosen bytes would let the answer's length tell about (docs/callers.md).

let server: TestServer;
let keyId = "";
const plaintext = new Uint8Array(2000).fill(0x61);

beforeAll(async () => {
  server = await startServer();
  const res = await fetch(`${server.url}/v1/keys`, { method: "POST", headers: { ...adminAuth(server.url), "content-type": "application/json" }, body: JSON.stringify({ parentId: "uncompressed" }) });
  keyId = ((await res.json()) as { id: string }).id;
});
afterAll(() => server.stop());

function encryptRequest(): Uint8Array {
  return toBinary(EncryptRequestSchema, create(EncryptRequestSchema, { keyId, keyVersionId: 1, plaintext }));
}

function expectUncompressedEncrypt(body: Buffer): void {
  expect(body[0]).toBe(0);
  const answer = fromBinary(EncryptResponseSchema, body.subarray(5, 5 + body.readUInt32BE(1)));
  expect([answer.keyId, answer.ciphertext.length]).toEqual([keyId, plaintext.length + 33]);
}

describe("answers of 1 KiB or more to callers that accept compression", () => {
  it("gRPC: flag 0 and no grpc-encoding, for a request sent plain or gzip-compressed", async () => {
    for (const compressed of [false, true]) {
      const message = compressed ? gzipSync(encryptRequest()) : encryptRequest();
      const body = frame(message);
      if (compressed) body[0] = 1;
      const answer = await rawCall(server.url, "/kms.v1.KeyManagerService/Encrypt", body, {
        "grpc-accept-encoding": "identity,deflate,gzip,br",
        ...(compressed ? { "grpc-encoding": "gzip" } : {}),
      });
      expect([compressed, answer.trailers["grpc-status"], answer.headers["grpc-encoding"]]).toEqual([compressed, "0", undefined]);
      expectUncompressedEncrypt(answer.body);
    }
  });

  it("gRPC-web and Connect: no compression either", async () => {
    const web = await fetch(`${server.url}/kms.v1.KeyManagerService/Encrypt`, {
      method: "POST",
      headers: { ...adminAuth(server.url), "content-type": "application/grpc-web+proto", "grpc-accept-encoding": "gzip,br", "x-grpc-web": "1" },
      body: new Uint8Array(frame(encryptRequest())),
    });
    expect([web.status, web.headers.get("grpc-encoding")]).toEqual([200, null]);
    expectUncompressedEncrypt(Buffer.from(await web.arrayBuffer()));
    const session = http2.connect(server.url);
    const connect = await new Promise<{ headers: http2.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const req = session.request({
        ":method": "POST",
        ":path": "/kms.v1.KeyManagerService/Encrypt",
        "content-type": "application/proto",
        "connect-protocol-version": "1",
        "accept-encoding": "gzip, br",
        ...adminAuth(server.url),
      });
      let headers: http2.IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      req.on("response", (h) => (headers = h));
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => resolve({ headers, body: Buffer.concat(chunks) }));
      req.on("error", reject);
      req.end(Buffer.from(encryptRequest()));
    });
    session.close();
    expect([connect.headers[":status"], connect.headers["content-encoding"]]).toEqual([200, undefined]);
    expect(fromBinary(EncryptResponseSchema, connect.body).ciphertext.length).toBe(plaintext.length + 33);
  });
});
