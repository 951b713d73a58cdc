import http from "node:http";
import { gzipSync } from "node:zlib";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { createRegistry } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { file_google_rpc_error_details } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { GetCryptoKeyRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import { adminAuth } from "../support/credentials.js";
import { frame, rawCall } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { frames, trailerFrame } from "../support/wire-call.js";

// A request envelope's flags byte is 0 or 1 (compressed) in gRPC, gRPC-web and Connect streams; any other value
// is MALFORMED_BODY on every protocol and both call paths (docs/callers.md, "Envelope flags"). connect-node read
// flag 2 or 0x80 as a message and served the call (gRPC-web, compressed gRPC, every call with CALL_PATH=connect).

const registry = createRegistry(file_google_rpc_error_details);
const PATH = "/kms.v1.KeyManagerService/GetCryptoKey";

function envelope(flags: number, payload: Uint8Array): Buffer {
  const out = frame(payload);
  out[0] = flags;
  return out;
}

// The status of grpc-status-details-bin, its details unpacked.
function decoded(bin: string | undefined): unknown {
  const status = fromBinary(StatusSchema, Buffer.from(bin ?? "", "base64"));
  return { code: status.code, message: status.message, details: status.details.map((d) => anyUnpack(d, registry)) };
}

function malformed(protocol: "gRPC" | "gRPC-web"): unknown {
  const message = `the request is not one uncompressed protobuf message in a ${protocol} envelope`;
  return {
    code: 3,
    message,
    details: [
      expect.objectContaining({ $typeName: "google.rpc.ErrorInfo", reason: "MALFORMED_BODY", domain: "kms" }),
      expect.objectContaining({ $typeName: "google.rpc.BadRequest", fieldViolations: [expect.objectContaining({ field: "", description: message })] }),
    ],
  };
}

// gRPC-web over HTTP/1.1: status, headers and the body's frames.
function grpcWeb(server: TestServer, body: Buffer): Promise<{ status: number; headers: http.IncomingHttpHeaders; frames: [number, Buffer][] }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${server.url}${PATH}`, {
      method: "POST",
      agent: false,
      headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", ...adminAuth(server.url) },
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, frames: frames(Buffer.concat(chunks)) }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe.each(["direct", "connect"] as const)("envelope flags, CALL_PATH=%s", (callPath) => {
  let server: TestServer;
  let request: Buffer;

  beforeAll(async () => {
    server = await startServer({ env: { CALL_PATH: callPath } });
    const res = await fetch(`${server.url}/v1/keys`, {
      method: "POST",
      headers: { "content-type": "application/json", ...adminAuth(server.url) },
      body: JSON.stringify({ parentId: "flags" }),
    });
    const key = (await res.json()) as { id: string };
    request = Buffer.from(toBinary(GetCryptoKeyRequestSchema, create(GetCryptoKeyRequestSchema, { keyId: key.id })));
  });
  afterAll(async () => {
    await server.stop();
  });

  test.each([
    ["flag 2", (m: Buffer) => envelope(0x02, m), {}],
    ["flag 0x80", (m: Buffer) => envelope(0x80, m), {}],
    ["flag 3, gzip", (m: Buffer) => envelope(0x03, gzipSync(m)), { "grpc-encoding": "gzip" }],
    ["flag 0x80 on a second envelope", (m: Buffer) => Buffer.concat([envelope(0, m), envelope(0x80, m)]), {}],
  ] as const)("gRPC: %s is MALFORMED_BODY", async (_name, body, extra) => {
    const res = await rawCall(server.url, PATH, body(request), { "x-request-id": "flags-1", ...extra });
    expect(res.headers[":status"]).toBe(200);
    expect(res.headers["content-type"]).toBe("application/grpc+proto");
    expect(res.headers["x-request-id"]).toBe("flags-1");
    expect(res.body.length).toBe(0);
    expect(res.trailers["grpc-status"]).toBe("3");
    expect(res.trailers["grpc-message"]).toBe("the request is not one uncompressed protobuf message in a gRPC envelope");
    expect(decoded(res.trailers["grpc-status-details-bin"] as string)).toEqual(malformed("gRPC"));
  });

  test("gRPC: flag 1 with gzip is served", async () => {
    const res = await rawCall(server.url, PATH, envelope(0x01, gzipSync(request)), { "grpc-encoding": "gzip" });
    expect(res.trailers["grpc-status"]).toBe("0");
  });

  // 0x80 marks the trailer frame, which only a server sends.
  test.each([
    ["flag 2", 0x02],
    ["flag 0x80 (a trailer frame)", 0x80],
  ])("gRPC-web: %s is MALFORMED_BODY in the trailer frame", async (_name, flags) => {
    const res = await grpcWeb(server, envelope(flags, request));
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toBe("application/grpc-web+proto");
    expect(res.frames.map(([f]) => f)).toEqual([0x80]);
    const trailer = trailerFrame(res.frames[0]![1]);
    expect(trailer["grpc-status"]).toBe("3");
    expect(trailer["grpc-message"]).toBe("the request is not one uncompressed protobuf message in a gRPC-web envelope");
    expect(decoded(trailer["grpc-status-details-bin"])).toEqual(malformed("gRPC-web"));
  });

  test("gRPC-web: flag 0 is served", async () => {
    const res = await grpcWeb(server, envelope(0, request));
    expect(res.frames.map(([f]) => f)).toEqual([0, 0x80]);
    expect(trailerFrame(res.frames[1]![1])["grpc-status"]).toBe("0");
  });
});
