import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  BadRequestSchema,
  ErrorInfoSchema,
  QuotaFailureSchema,
} from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import type { Status } from "../../gen/google/rpc/status_pb.js";
import { CreateCryptoKeyRequestSchema, EncryptRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import { adminAuth } from "../support/credentials.js";
import { withAuthorization } from "../support/kms-clients.js";
import { frame, rawCall } from "../support/raw-grpc.js";
import { rawRequest } from "../support/raw-http1.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// Requests refused by the rules of their protocol, before any handler runs, get the ErrorInfo every error
// carries (with the domain of the service called), a request id, and the same reason on every protocol. The
// cases run against both call paths: the direct adapters (src/transport/grpc/grpc-unary-adapter.ts, REST) and
// connect-node's (src/transport/connect/handler-wrapper.ts); each checks the exact wire form and that nothing
// was stored.

const CREATE = "/kms.v1.KeyManagerService/CreateCryptoKey";
const NAMESPACE = "protocol-errors";
const MIB = 1024 * 1024;

// A CreateCryptoKeyRequest cut off inside its parentId field: not a decodable message.
const truncated = toBinary(CreateCryptoKeyRequestSchema, create(CreateCryptoKeyRequestSchema, { parentId: NAMESPACE })).subarray(0, 5);
// Over the 4 MiB limit, and a valid request otherwise.
const oversized = toBinary(
  CreateCryptoKeyRequestSchema,
  create(CreateCryptoKeyRequestSchema, { parentId: NAMESPACE, description: "d".repeat(5 * MIB) }),
);

function detail<D extends DescMessage>(status: Status, desc: D): MessageShape<D> | undefined {
  for (const any of status.details) {
    const value = anyUnpack(any, desc);
    if (value !== undefined) return value;
  }
  return undefined;
}

function statusFromBin(value: string | string[] | undefined): Status {
  return fromBinary(StatusSchema, Buffer.from(String(value), "base64"));
}

// The trailer frame (flag 0x80) at the end of a gRPC-web body, as headers.
function grpcWebTrailer(body: Buffer): Map<string, string> {
  let at = 0;
  while (at + 5 <= body.length) {
    const length = body.readUInt32BE(at + 1);
    if (body[at] === 0x80) {
      const text = body.subarray(at + 5, at + 5 + length).toString("latin1");
      const lines = text.split("\r\n").filter((l) => l !== "");
      return new Map(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
    }
    at += 5 + length;
  }
  throw new Error("no trailer frame in the gRPC-web body");
}

describe.each(["direct", "connect"])("protocol errors, CALL_PATH=%s", (callPath) => {
  let server: TestServer;

  async function storedKeyCount(): Promise<number> {
    const res = await fetch(`${server.url}/kms.v1.KeyManagerService/ListCryptoKeys`, {
      method: "POST",
      headers: { "content-type": "application/json", ...adminAuth(server.url) },
      body: JSON.stringify({ parentId: NAMESPACE }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { keys?: unknown[] };
    return body.keys?.length ?? 0;
  }

  beforeAll(async () => {
    server = await startServer({ env: { CALL_PATH: callPath } });
  });
  afterAll(() => server.stop());
  beforeEach(async () => {
    expect(await storedKeyCount()).toBe(0);
  });

  describe("Connect JSON", () => {
    it("answers a body that is not JSON with 400, MALFORMED_BODY and the caller's request id", async () => {
      const res = await fetch(`${server.url}${CREATE}`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-request-id": "bad-json-1", ...adminAuth(server.url) },
        body: '{"parentId": ',
      });
      expect(res.status).toBe(400);
      expect(res.headers.get("x-request-id")).toBe("bad-json-1");
      const body = (await res.json()) as { code: string; message: string; details: { type: string; debug: unknown }[] };
      expect(body.code).toBe("invalid_argument");
      expect(body.message).toBe("the request body is not a JSON object of the method's request type");
      expect(body.details.map((d) => [d.type, d.debug])).toEqual([
        ["google.rpc.ErrorInfo", { reason: "MALFORMED_BODY", domain: "kms" }],
        // The JSON form of a detail leaves out fields at their default value, here `field: ""`.
        ["google.rpc.BadRequest", { fieldViolations: [{ description: body.message }] }],
      ]);
      expect(Number(res.headers.get("content-length"))).toBe(Buffer.byteLength(JSON.stringify(body)));
      expect(await storedKeyCount()).toBe(0);
    });

    it("answers an undecodable binary message with 400 and invalid_argument, never 500", async () => {
      for (const path of [CREATE, "/kms.v1.KeyManagerService/Encrypt"]) {
        const res = await fetch(`${server.url}${path}`, {
          method: "POST",
          headers: { "content-type": "application/proto", ...adminAuth(server.url) },
          body: Buffer.from([0xff, 0xff, 0xff]),
        });
        expect(res.status).toBe(400);
        const body = (await res.json()) as { code: string; details: { type: string; debug: unknown }[] };
        expect(body.code).toBe("invalid_argument");
        expect(body.details[0]?.debug).toEqual({ reason: "MALFORMED_BODY", domain: "kms" });
      }
      expect(await storedKeyCount()).toBe(0);
    });

    it("answers a message over 4 MiB with 429, REQUEST_TOO_LARGE and a QuotaFailure", async () => {
      const res = await fetch(`${server.url}${CREATE}`, {
        method: "POST",
        headers: { "content-type": "application/proto", ...adminAuth(server.url) },
        body: oversized,
      });
      expect(res.status).toBe(429);
      expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
      const body = (await res.json()) as { code: string; details: { type: string; debug: unknown }[] };
      expect(body.code).toBe("resource_exhausted");
      expect(body.details.map((d) => d.type)).toEqual(["google.rpc.ErrorInfo", "google.rpc.QuotaFailure"]);
      expect(body.details[0]?.debug).toEqual({ reason: "REQUEST_TOO_LARGE", domain: "kms" });
      expect(await storedKeyCount()).toBe(0);
    });
  });

  describe("gRPC", () => {
    it("answers an undecodable message with INVALID_ARGUMENT and MALFORMED_BODY in grpc-status-details-bin", async () => {
      const res = await rawCall(server.url, CREATE, frame(truncated), { "x-request-id": "bad-proto-1" });
      expect(res.headers[":status"]).toBe(200);
      expect(res.headers["x-request-id"]).toBe("bad-proto-1");
      expect(res.trailers["grpc-status"]).toBe("3");
      const status = statusFromBin(res.trailers["grpc-status-details-bin"]);
      expect(status.code).toBe(3);
      expect(decodeURIComponent(String(res.trailers["grpc-message"]))).toBe(status.message);
      expect(detail(status, ErrorInfoSchema)).toMatchObject({ reason: "MALFORMED_BODY", domain: "kms" });
      expect(detail(status, BadRequestSchema)?.fieldViolations).toEqual([
        expect.objectContaining({ field: "", description: status.message }),
      ]);
      expect(await storedKeyCount()).toBe(0);
    });

    it("answers a message over 4 MiB with RESOURCE_EXHAUSTED and REQUEST_TOO_LARGE", async () => {
      const res = await rawCall(server.url, CREATE, frame(oversized));
      expect(res.trailers["grpc-status"]).toBe("8");
      const status = statusFromBin(res.trailers["grpc-status-details-bin"]);
      expect(detail(status, ErrorInfoSchema)?.reason).toBe("REQUEST_TOO_LARGE");
      expect(detail(status, QuotaFailureSchema)?.violations).toHaveLength(1);
      expect(res.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
      expect(await storedKeyCount()).toBe(0);
    });

    it("answers gzip data that does not decompress (truncated, or not gzip) with INVALID_ARGUMENT, never INTERNAL", async () => {
      for (const data of [Buffer.from([0xf0]), Buffer.from([0x1f, 0x8b, 0x08, 0x00]), Buffer.from("not gzip")]) {
        const compressed = Buffer.concat([Buffer.from([1, 0, 0, 0, data.length]), data]);
        const res = await rawCall(server.url, CREATE, compressed, { "grpc-encoding": "gzip" });
        expect(res.trailers["grpc-status"]).toBe("3");
        const status = statusFromBin(res.trailers["grpc-status-details-bin"]);
        expect(detail(status, ErrorInfoSchema)).toMatchObject({ reason: "MALFORMED_BODY", domain: "kms" });
      }
      expect(await storedKeyCount()).toBe(0);
    });

    it("answers an unknown grpc-encoding with UNIMPLEMENTED and PROTOCOL_ERROR", async () => {
      const valid = toBinary(CreateCryptoKeyRequestSchema, create(CreateCryptoKeyRequestSchema, { parentId: NAMESPACE }));
      const res = await rawCall(server.url, CREATE, frame(valid), { "grpc-encoding": "snappy" });
      expect(res.trailers["grpc-status"]).toBe("12");
      const status = statusFromBin(res.trailers["grpc-status-details-bin"]);
      expect(status.message).toContain('unknown compression "snappy"');
      expect(detail(status, ErrorInfoSchema)).toMatchObject({ reason: "PROTOCOL_ERROR", domain: "kms" });
      expect(await storedKeyCount()).toBe(0);
    });

    it("answers a unary call without its message with UNIMPLEMENTED and PROTOCOL_ERROR", async () => {
      const res = await rawCall(server.url, CREATE, Buffer.alloc(0));
      expect(res.trailers["grpc-status"]).toBe("12");
      const status = statusFromBin(res.trailers["grpc-status-details-bin"]);
      expect(status.message).toBe("a unary call sends exactly one request message");
      expect(detail(status, ErrorInfoSchema)).toMatchObject({ reason: "PROTOCOL_ERROR", domain: "kms" });
      expect(await storedKeyCount()).toBe(0);
    });
  });

  describe("gRPC-web", () => {
    it("answers an undecodable message with the same status in its trailer frame", async () => {
      const res = await fetch(`${server.url}${CREATE}`, {
        method: "POST",
        headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", "x-request-id": "bad-web-1", ...adminAuth(server.url) },
        body: new Uint8Array(frame(truncated)),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-request-id")).toBe("bad-web-1");
      const trailer = grpcWebTrailer(Buffer.from(await res.arrayBuffer()));
      expect(trailer.get("grpc-status")).toBe("3");
      const status = statusFromBin(trailer.get("grpc-status-details-bin"));
      expect(detail(status, ErrorInfoSchema)).toMatchObject({ reason: "MALFORMED_BODY", domain: "kms" });
      expect(detail(status, BadRequestSchema)?.fieldViolations).toHaveLength(1);
      expect(await storedKeyCount()).toBe(0);
    });
  });

  describe("streaming calls (health Watch), whose request is read inside the interceptor", () => {
    // HealthCheckRequest.service (field 1, length 5) with one byte of the five.
    const brokenWatch = Buffer.from([0x0a, 0x05, 0x61]);

    it("answers an undecodable request over gRPC with INVALID_ARGUMENT, not INTERNAL", async () => {
      const res = await rawCall(server.url, "/grpc.health.v1.Health/Watch", frame(brokenWatch));
      expect(res.trailers["grpc-status"]).toBe("3");
      const status = statusFromBin(res.trailers["grpc-status-details-bin"]);
      expect(status.message).toBe("the request is not one uncompressed protobuf message in a gRPC envelope");
      // gRPC's own services belong to no product area.
      expect(detail(status, ErrorInfoSchema)).toMatchObject({ reason: "MALFORMED_BODY", domain: "cloudplane" });
      expect(server.logs()).not.toContain("internal error");
    });

    it("answers it over the Connect protocol with the same error in the end-of-stream message", async () => {
      const res = await fetch(`${server.url}/grpc.health.v1.Health/Watch`, {
        method: "POST",
        headers: { "content-type": "application/connect+proto", "x-request-id": "watch-1" },
        body: new Uint8Array(frame(brokenWatch)),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-request-id")).toBe("watch-1");
      const body = Buffer.from(await res.arrayBuffer());
      // One frame: flag 2 (end of stream), then its JSON.
      expect(body[0]).toBe(2);
      const end = JSON.parse(body.subarray(5).toString()) as { error: { code: string; details: { type: string; debug: unknown }[] } };
      expect(end.error.code).toBe("invalid_argument");
      expect(end.error.details[0]).toMatchObject({ type: "google.rpc.ErrorInfo", debug: { reason: "MALFORMED_BODY", domain: "cloudplane" } });
    });
  });

  // docs/errors.md, "An invalid timeout": INVALID_ARGUMENT with PROTOCOL_ERROR, on every protocol and path.
  describe("HTTP/1.1 requests Node's parser refuses before any route is read", () => {
    // The REST error body's code, and its ErrorInfo and QuotaFailure decoded.
    function refusal(body: string): { code: number; reason: string; domain: string; violations: number } {
      const b = JSON.parse(body) as { code: number; details: { typeUrl: string; value: string }[] };
      const info = b.details.find((d) => d.typeUrl.endsWith("ErrorInfo"));
      const quota = b.details.find((d) => d.typeUrl.endsWith("QuotaFailure"));
      const decoded = fromBinary(ErrorInfoSchema, Buffer.from(info!.value, "base64"));
      const violations = quota === undefined ? 0 : fromBinary(QuotaFailureSchema, Buffer.from(quota.value, "base64")).violations.length;
      return { code: b.code, reason: decoded.reason, domain: decoded.domain, violations };
    }

    it("answers a head over 16 KiB with 431, REQUEST_HEAD_TOO_LARGE in JSON, the route's domain, and closes", async () => {
      const auth = adminAuth(server.url).authorization;
      const onCompute = await rawRequest(server.port, `GET /cluster/v1/${"x".repeat(16_500)}/tasks/t:wait HTTP/1.1\r\nhost: a\r\nauthorization: ${auth}\r\n\r\n`);
      expect(onCompute.status).toBe(431);
      expect(onCompute.headers["content-type"]).toBe("application/json");
      expect(onCompute.headers.connection).toBe("close");
      expect(onCompute.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
      expect(refusal(onCompute.body)).toEqual({ code: 8, reason: "REQUEST_HEAD_TOO_LARGE", domain: "compute", violations: 1 });
      expect((JSON.parse(onCompute.body) as { message: string }).message).toBe("the request line and headers are larger than 16384 bytes");
      // A header too large on a key management route.
      const onKms = await rawRequest(server.port, `POST /v1/encrypt HTTP/1.1\r\nhost: a\r\nx-padding: ${"p".repeat(17_000)}\r\n\r\n`);
      expect(onKms.status).toBe(431);
      expect(refusal(onKms.body)).toMatchObject({ reason: "REQUEST_HEAD_TOO_LARGE", domain: "kms" });
      // A request line the parser had not read to its end (Node reads 64 KiB at a time) names no route.
      const noLine = await rawRequest(server.port, `GET /v1/keys/${"k".repeat(70_000)} HTTP/1.1\r\nhost: a\r\n\r\n`);
      expect(noLine.status).toBe(431);
      expect(refusal(noLine.body)).toMatchObject({ reason: "REQUEST_HEAD_TOO_LARGE", domain: "cloudplane" });
    });

    it("answers a head Node cannot parse with 400, PROTOCOL_ERROR in JSON", async () => {
      const bad = await rawRequest(server.port, "POST /v1/encrypt HTTP/1.1\r\nhost: a\r\nno colon here\r\n\r\n");
      expect(bad.status).toBe(400);
      expect(bad.headers["content-type"]).toBe("application/json");
      expect(refusal(bad.body)).toEqual({ code: 3, reason: "PROTOCOL_ERROR", domain: "kms", violations: 0 });
      expect((JSON.parse(bad.body) as { message: string }).message).toBe("the request is not well-formed HTTP/1.1");
    });
  });

  describe("a timeout header that is not of its form", () => {
    const valid = toBinary(CreateCryptoKeyRequestSchema, create(CreateCryptoKeyRequestSchema, { parentId: NAMESPACE }));
    const grpcForm = "grpc-timeout must be 1 to 8 digits and a unit, one of H M S m u n";
    const connectForm = "connect-timeout-ms must be 1 to 10 digits, the timeout in milliseconds";

    it.each([["abc"], ["1.5S"], ["123456789S"], ["-1S"]])("grpc-timeout %s over gRPC: INVALID_ARGUMENT, PROTOCOL_ERROR", async (value) => {
      const res = await rawCall(server.url, CREATE, frame(valid), { "grpc-timeout": value, "x-request-id": "timeout-1" });
      expect(res.headers["x-request-id"]).toBe("timeout-1");
      expect(res.trailers["grpc-status"]).toBe("3");
      expect(res.trailers["grpc-message"]).toBe(grpcForm);
      const status = statusFromBin(res.trailers["grpc-status-details-bin"]);
      expect(detail(status, ErrorInfoSchema)).toMatchObject({ reason: "PROTOCOL_ERROR", domain: "kms" });
      expect(detail(status, BadRequestSchema)?.fieldViolations).toEqual([expect.objectContaining({ field: "", description: grpcForm })]);
      expect(await storedKeyCount()).toBe(0);
    });

    it("grpc-timeout over gRPC-web: the same status in the trailer frame", async () => {
      const res = await fetch(`${server.url}${CREATE}`, {
        method: "POST",
        headers: { "content-type": "application/grpc-web+proto", "grpc-timeout": "abc" },
        body: new Uint8Array(frame(valid)),
      });
      const trailer = grpcWebTrailer(Buffer.from(await res.arrayBuffer()));
      expect(trailer.get("grpc-status")).toBe("3");
      expect(detail(statusFromBin(trailer.get("grpc-status-details-bin")), ErrorInfoSchema)).toMatchObject({ reason: "PROTOCOL_ERROR", domain: "kms" });
      expect(await storedKeyCount()).toBe(0);
    });

    it("connect-timeout-ms over Connect and REST: 400, invalid_argument, PROTOCOL_ERROR", async () => {
      const connect = await fetch(`${server.url}${CREATE}`, {
        method: "POST",
        headers: { "content-type": "application/json", "connect-timeout-ms": "-1" },
        body: JSON.stringify({ parentId: NAMESPACE }),
      });
      expect(connect.status).toBe(400);
      const error = (await connect.json()) as { code: string; message: string; details: { debug: unknown }[] };
      expect([error.code, error.message, error.details[0]?.debug]).toEqual(["invalid_argument", connectForm, { reason: "PROTOCOL_ERROR", domain: "kms" }]);
      const rest = await fetch(`${server.url}/v1/keys`, {
        method: "POST",
        headers: { "content-type": "application/json", "connect-timeout-ms": "1.5" },
        body: JSON.stringify({ parentId: NAMESPACE }),
      });
      expect(rest.status).toBe(400);
      expect(((await rest.json()) as { code: number; message: string }).message).toBe(connectForm);
      expect(await storedKeyCount()).toBe(0);
    });
  });

  it("leaves errors of our own handlers as they are, with grpc-message as the gRPC spec encodes it", async () => {
    const empty = toBinary(CreateCryptoKeyRequestSchema, create(CreateCryptoKeyRequestSchema, {}));
    const res = await rawCall(server.url, CREATE, frame(empty), { "x-request-id": "own-1" });
    expect(res.trailers["grpc-status"]).toBe("3");
    expect(res.trailers["grpc-message"]).toBe("parentId: is required");
    expect(res.headers["x-request-id"]).toBe("own-1");
    // Once, not once per rewrite of the status.
    expect(res.trailers["x-request-id"]).toBe("own-1");
    const status = statusFromBin(res.trailers["grpc-status-details-bin"]);
    expect(detail(status, ErrorInfoSchema)).toMatchObject({ reason: "REQUEST_INVALID", domain: "kms" });
    expect(detail(status, BadRequestSchema)?.fieldViolations.map((v) => v.field)).toEqual(["parentId"]);
  });
});

// @grpc/grpc-js decodes grpc-message with decodeURI, which leaves "%3A" as it is: the message must reach it
// without needless escapes, on the fast path (Encrypt) and on Connect's (CreateCryptoKey) alike.
describe("error messages as @grpc/grpc-js shows them", () => {
  let server: TestServer;
  let client: grpc.Client;

  beforeAll(async () => {
    server = await startServer();
    client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure(), { interceptors: [withAuthorization(adminAuth(server.url).authorization)] });
  });
  afterAll(async () => {
    client.close();
    await server.stop();
  });

  function failedCall(path: string, request: Uint8Array): Promise<grpc.ServiceError> {
    return new Promise((resolve, reject) => {
      client.makeUnaryRequest(
        path,
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from(request),
        (error: grpc.ServiceError | null) => (error === null ? reject(new Error("the call succeeded")) : resolve(error)),
      );
    });
  }

  it.each([
    ["/kms.v1.KeyManagerService/Encrypt", toBinary(EncryptRequestSchema, create(EncryptRequestSchema, {}))],
    [CREATE, toBinary(CreateCryptoKeyRequestSchema, create(CreateCryptoKeyRequestSchema, {}))],
  ])("%s: details read exactly as the google.rpc.Status message", async (path, request) => {
    const error = await failedCall(path, request);
    expect(error.code).toBe(grpc.status.INVALID_ARGUMENT);
    const status = statusFromBin((error.metadata.get("grpc-status-details-bin")[0] as Buffer).toString("base64"));
    expect(status.message).toContain(": ");
    expect(error.details).toBe(status.message);
  });
});
