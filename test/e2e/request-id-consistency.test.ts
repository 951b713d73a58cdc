import { gzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GetCryptoKeyRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import { adminAuth } from "../support/credentials.js";
import { frame, rawCall } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { frames, trailerFrame } from "../support/wire-call.js";

// A caller who sends no x-request-id gets one id for the call: the response header, the status (gRPC trailers;
// gRPC-web's HTTP headers, where a refusal's metadata is moved from its trailer frame) and the server's log line all
// carry the same one. The calls connect-node serves failed
// with one id in the header and another in the trailers and the log (a probe, 2026-11-27), so each way into
// connect-node is tried, on both call paths.

const PATH = "/kms.v1.KeyManagerService/GetCryptoKey";
const UUID = /^[0-9a-f-]{36}$/;
const message = toBinary(GetCryptoKeyRequestSchema, create(GetCryptoKeyRequestSchema, { keyId: "no-such-key" }));
const unknownKey = (): Buffer => frame(message);

function gzipFrame(message: Uint8Array): Buffer {
  const packed = gzipSync(message);
  const out = Buffer.alloc(5 + packed.length);
  out[0] = 1;
  out.writeUInt32BE(packed.length, 1);
  out.set(packed, 5);
  return out;
}

describe.each(["direct", "connect"])("one request id per failed call, on the %s call path", (callPath) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startServer({ env: { CALL_PATH: callPath, LOG_LEVEL: "debug" } });
  });
  afterAll(() => server.stop());

  // The id is in the server's log, with the call's failure.
  const logged = (id: string): void => {
    const lines = server.logs().split("\n").filter((line) => line.includes(id));
    expect(lines.length, `log lines with ${id}`).toBeGreaterThan(0);
  };

  it("gRPC, plain and gzip-compressed: header and trailers", async () => {
    for (const [body, extra] of [
      [unknownKey(), {}],
      [gzipFrame(message), { "grpc-encoding": "gzip" }],
    ] as const) {
      const res = await rawCall(server.url, PATH, body, extra);
      expect(res.trailers["grpc-status"]).toBe("5");
      const id = String(res.headers["x-request-id"]);
      expect(id).toMatch(UUID);
      expect(res.trailers["x-request-id"]).toBe(id);
      logged(id);
    }
  });

  it("gRPC-web, binary and text: header and trailer frame", async () => {
    for (const text of [false, true]) {
      const res = await fetch(`${server.url}${PATH}`, {
        method: "POST",
        headers: { "content-type": text ? "application/grpc-web-text" : "application/grpc-web+proto", "x-grpc-web": "1", ...adminAuth(server.url) },
        body: text ? unknownKey().toString("base64") : new Uint8Array(unknownKey()),
      });
      const raw = Buffer.from(await res.arrayBuffer());
      const body = text ? Buffer.from(raw.toString(), "base64") : raw;
      const [flag, payload] = frames(body).at(-1) ?? [0, Buffer.alloc(0)];
      expect(flag).toBe(0x80);
      const trailer = trailerFrame(payload);
      expect(trailer["grpc-status"]).toBe("5");
      const id = res.headers.get("x-request-id") ?? "";
      expect(id).toMatch(UUID);
      // Once, in the HTTP headers, as a native gRPC trailers-only answer has it in its one block: connect-web merges
      // headers and trailer frame into an error's metadata, and read "<id>, <id>".
      expect(trailer["x-request-id"]).toBeUndefined();
      logged(id);
    }
  });

  it("Connect JSON: the header of the error answer is the id of the log line", async () => {
    const res = await fetch(`${server.url}${PATH}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...adminAuth(server.url) },
      body: JSON.stringify({ keyId: "no-such-key" }),
    });
    expect(res.status).toBe(404);
    const id = res.headers.get("x-request-id") ?? "";
    expect(id).toMatch(UUID);
    logged(id);
  });
});
