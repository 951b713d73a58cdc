import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminAuth } from "../support/credentials.js";
import { frame, rawCall } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { frames, trailerFrame } from "../support/wire-call.js";

// gRPC and gRPC-web with the JSON codec (`+json`): a message that is not JSON of the request type is refused in
// words about JSON, not about protobuf (a probe, 2026-11-27, got "not one uncompressed protobuf message").

describe.each(["direct", "connect"])("a +json gRPC message of the wrong shape, on the %s call path", (callPath) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: { CALL_PATH: callPath } });
  });
  afterAll(() => server.stop());

  const body = frame(Buffer.from(JSON.stringify({ keyId: 1 })));

  it("gRPC: INVALID_ARGUMENT MALFORMED_BODY about a JSON message", async () => {
    const res = await rawCall(server.url, "/kms.v1.KeyManagerService/GetCryptoKey", body, { "content-type": "application/grpc+json" });
    const status = res.trailers["grpc-status"] ?? res.headers["grpc-status"];
    const message = decodeURIComponent(String(res.trailers["grpc-message"] ?? res.headers["grpc-message"]));
    expect({ status, message }).toEqual({
      status: "3",
      message: "the request is not one uncompressed JSON message of the method's request type in a gRPC envelope",
    });
  });

  it("gRPC: an envelope flagged neither 0 nor 1 is described the same way", async () => {
    const flagged = Buffer.from(body);
    flagged[0] = 2;
    const res = await rawCall(server.url, "/kms.v1.KeyManagerService/GetCryptoKey", flagged, { "content-type": "application/grpc+json" });
    expect(decodeURIComponent(String(res.trailers["grpc-message"] ?? res.headers["grpc-message"]))).toBe(
      "the request is not one uncompressed JSON message of the method's request type in a gRPC envelope",
    );
  });

  it("gRPC-web: the same in its trailer frame", async () => {
    const res = await fetch(`${server.url}/kms.v1.KeyManagerService/GetCryptoKey`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+json", "x-grpc-web": "1", ...adminAuth(server.url) },
      body: new Uint8Array(body),
    });
    const [flag, payload] = frames(Buffer.from(await res.arrayBuffer())).at(-1) ?? [0, Buffer.alloc(0)];
    expect(flag).toBe(0x80);
    const trailer = trailerFrame(payload);
    expect({ status: trailer["grpc-status"], message: decodeURIComponent(trailer["grpc-message"] ?? "") }).toEqual({
      status: "3",
      message: "the request is not one uncompressed JSON message of the method's request type in a gRPC-web envelope",
    });
  });
});
