import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { compressionGzip, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DecryptRequestSchema, DecryptResponseSchema, EncryptRequestSchema, EncryptResponseSchema, KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { frame, rawCall } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// Encrypt and Decrypt over gRPC are served by src/transport/grpc/unary-fast-path.ts; everything else, and any
// request it does not take (compression, other content types), by Connect. Callers must not be able to tell.
describe("gRPC fast path for Encrypt and Decrypt", () => {
  let server: TestServer;
  let keyId: string;
  const path = "/kms.v1.KeyManagerService/Encrypt";

  beforeAll(async () => {
    server = await startServer();
    const client = createClient(KeyManagerService, createGrpcTransport({ baseUrl: server.url }));
    keyId = (await client.createCryptoKey({ parentId: "fast" })).id;
  });
  afterAll(() => server.stop());

  it("answers with one framed message, grpc-status 0 in the trailers and the caller's request id", async () => {
    const request = toBinary(EncryptRequestSchema, create(EncryptRequestSchema, { keyId, keyVersionId: 1, plaintext: Buffer.from("hi") }));
    const res = await rawCall(server.url, path, frame(request), { "x-request-id": "fast-1" });
    expect(res.headers[":status"]).toBe(200);
    expect(res.headers["content-type"]).toBe("application/grpc");
    expect(res.headers["x-request-id"]).toBe("fast-1");
    expect(res.trailers["grpc-status"]).toBe("0");
    expect(res.body.readUInt32BE(1)).toBe(res.body.length - 5);
    const reply = fromBinary(EncryptResponseSchema, res.body.subarray(5));
    expect(reply.keyId).toBe(keyId);
    const decryptRequest = toBinary(DecryptRequestSchema, create(DecryptRequestSchema, { keyId, ciphertext: reply.ciphertext }));
    const decrypted = await rawCall(server.url, "/kms.v1.KeyManagerService/Decrypt", frame(decryptRequest));
    expect(Buffer.from(fromBinary(DecryptResponseSchema, decrypted.body.subarray(5)).plaintext).toString()).toBe("hi");
  });

  it("sends the same error trailers as Connect's own gRPC handler", async () => {
    const bad = { keyId, keyVersionId: 0, plaintext: new Uint8Array() };
    const fast = await rawCall(server.url, path, frame(toBinary(EncryptRequestSchema, create(EncryptRequestSchema, bad))));
    // grpc-encoding gzip is left to Connect, which serves the very same call.
    const viaConnect = await new Promise<ConnectError>((resolve) => {
      const client = createClient(KeyManagerService, createGrpcTransport({ baseUrl: server.url, sendCompression: compressionGzip }));
      client.encrypt(bad).catch((e: unknown) => resolve(ConnectError.from(e)));
    });
    expect(fast.headers["grpc-status"]).toBe(String(Code.InvalidArgument));
    expect(viaConnect.code).toBe(Code.InvalidArgument);
    expect(decodeURIComponent(String(fast.headers["grpc-message"]))).toBe(viaConnect.rawMessage);
    const fastDetails = fromBinary(
      StatusSchema,
      Buffer.from(String(fast.headers["grpc-status-details-bin"]), "base64"),
    ).details.map((d) => [d.typeUrl, Buffer.from(d.value).toString("base64")]);
    const connectDetails = viaConnect.details.map((d) => ("type" in d ? [`type.googleapis.com/${d.type}`, Buffer.from(d.value).toString("base64")] : []));
    expect(fastDetails).toEqual(connectDetails);
    expect(fastDetails.map((d) => d[0])).toEqual(["type.googleapis.com/google.rpc.ErrorInfo", "type.googleapis.com/google.rpc.BadRequest"]);
  });

  it("rejects a body that is not one envelope with INVALID_ARGUMENT", async () => {
    const res = await rawCall(server.url, path, Buffer.from([0, 0, 0, 0, 9, 1]));
    expect(res.headers["grpc-status"]).toBe(String(Code.InvalidArgument));
  });

  it("rejects a message over 4 MiB with RESOURCE_EXHAUSTED and stays healthy", async () => {
    const res = await rawCall(server.url, path, frame(new Uint8Array(4 * 1024 * 1024 + 1)));
    expect(res.headers["grpc-status"]).toBe(String(Code.ResourceExhausted));
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });
});
