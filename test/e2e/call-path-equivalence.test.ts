import { create, createRegistry, fromBinary, toBinary, toJson } from "@bufbuild/protobuf";
import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CreateCryptoKeyRequestSchema,
  DisableCryptoKeyVersionRequestSchema,
  EncryptRequestSchema,
  GetCryptoKeyRequestSchema,
  KeyManagerService,
} from "../../gen/kms/v1/kms_pb.js";
import { file_google_rpc_error_details } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import type { Stage } from "../../src/pipeline/stage.js";
import { adminAuth } from "../support/credentials.js";
import { adminAuthInterceptor } from "../support/kms-clients.js";
import { frame, rawCall } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// Connect is the reference implementation: the direct adapters (gRPC unary, REST) must answer exactly as
// connect-node does. Two servers, one with CALL_PATH=direct (the default) and one with CALL_PATH=connect, get the
// same requests; for every class of error, and for successes, the callers see the same status, headers,
// trailers and body, byte for byte once the parts that differ by nature (dates, generated key ids) are masked.

// A key version no test key has: an Encrypt naming it (with a key that exists, so that the access check lets the
// call through to this stage) meets a fault of the server, for the class "internal".
const FAULT = 424242;
const injectFault: Stage = (call, next) => {
  if ((call.request as { keyVersionId?: unknown }).keyVersionId === FAULT) throw new Error("injected fault");
  return next(call);
};

interface Side {
  server: TestServer;
  keyId: string;
}

const MIB = 1024 * 1024;
const registry = createRegistry(file_google_rpc_error_details);

function binary<D extends DescMessage>(desc: D, init: MessageInitShape<D>): Buffer {
  return frame(toBinary(desc, create(desc, init)));
}

// Everything a caller can observe, with what differs by nature masked; the binary status decoded, so that the key
// id inside it can be masked too.
function masked(side: Side, value: unknown): unknown {
  const text = JSON.stringify(value, (key, v: unknown) => {
    if (key === "date") return "<date>";
    if (key === "grpc-status-details-bin") return toJson(StatusSchema, fromBinary(StatusSchema, Buffer.from(String(v), "base64")), { registry });
    return v;
  });
  return JSON.parse(text.split(side.keyId).join("<key>")) as unknown;
}

type Probe = (side: Side) => Promise<unknown>;

// A message of `n` unknown fields (fixed64, field 8), whatever the request type.
function unknownFields(n: number): Buffer {
  const bytes = Buffer.alloc(n * 9);
  for (let i = 0; i < n; i++) bytes[i * 9] = 0x41;
  return bytes;
}

// An envelope with its flags byte set to `flags`.
function flagged(flags: number, envelope: Buffer): Buffer {
  const out = Buffer.from(envelope);
  out[0] = flags;
  return out;
}

function grpc(path: string, body: (side: Side) => Buffer, extra: Record<string, string> = {}): Probe {
  return async (side) => {
    const res = await rawCall(side.server.url, `/kms.v1.KeyManagerService/${path}`, body(side), { "x-request-id": "eq-1", ...extra });
    const status = res.trailers["grpc-status"] ?? res.headers["grpc-status"];
    // A successful body holds fresh ciphertext or timestamps: its presence is compared, the rest by status.
    return masked(side, { headers: res.headers, trailers: res.trailers, body: status === "0" ? res.body.length > 0 : res.body.toString("base64") });
  };
}

function rest(method: string, path: (side: Side) => string, body?: (side: Side) => string | Buffer, extra: Record<string, string> = {}, auth = true): Probe {
  return async (side) => {
    const res = await fetch(`${side.server.url}${path(side)}`, {
      method,
      headers: { "x-request-id": "eq-1", "content-type": "application/json", ...(auth ? adminAuth(side.server.url) : {}), ...extra },
      body: body === undefined ? undefined : new Uint8Array(Buffer.from(body(side))),
    });
    const headers = Object.fromEntries([...res.headers].filter(([name]) => name !== "date" && name !== "content-length" && name !== "keep-alive"));
    const json = (await res.json()) as Record<string, unknown>;
    return masked(side, { status: res.status, headers, body: res.ok ? Object.keys(json).sort() : json });
  };
}

const cases: [string, Probe][] = [
  ["gRPC success (Encrypt)", grpc("Encrypt", (s) => binary(EncryptRequestSchema, { keyId: s.keyId, keyVersionId: 1, plaintext: Buffer.from("x") }))],
  ["gRPC success (GetCryptoKey)", grpc("GetCryptoKey", (s) => binary(GetCryptoKeyRequestSchema, { keyId: s.keyId }))],
  ["gRPC oversize", grpc("CreateCryptoKey", () => frame(new Uint8Array(4 * MIB + 1)))],
  ["gRPC bad envelope (cut short)", grpc("CreateCryptoKey", () => Buffer.from([0, 0, 0, 0, 9, 1]))],
  ["gRPC no message", grpc("CreateCryptoKey", () => Buffer.alloc(0))],
  ["gRPC two messages", grpc("GetCryptoKey", (s) => Buffer.concat([binary(GetCryptoKeyRequestSchema, { keyId: s.keyId }), binary(GetCryptoKeyRequestSchema, { keyId: s.keyId })]))],
  ["gRPC bad protobuf", grpc("CreateCryptoKey", () => frame(Buffer.from([0x0a, 0x05, 0x61])))],
  // A request envelope's flags are 0 or 1 (docs/callers.md, "Envelope flags"): connect-node served any other.
  ["gRPC envelope flag 2", grpc("GetCryptoKey", (s) => flagged(0x02, binary(GetCryptoKeyRequestSchema, { keyId: s.keyId })))],
  ["gRPC envelope flag 0x80", grpc("GetCryptoKey", (s) => flagged(0x80, binary(GetCryptoKeyRequestSchema, { keyId: s.keyId })))],
  ["gRPC second envelope flag 0x80", grpc("GetCryptoKey", (s) => Buffer.concat([binary(GetCryptoKeyRequestSchema, { keyId: s.keyId }), flagged(0x80, binary(GetCryptoKeyRequestSchema, { keyId: s.keyId }))]))],
  // After the message: a whole second one, then an envelope with flags no request has (connect-node answered by the
  // third, the direct adapter by the second); a second declared too large; one cut short.
  ["gRPC two messages, then flag 2", grpc("GetCryptoKey", (s) => Buffer.concat([binary(GetCryptoKeyRequestSchema, { keyId: s.keyId }), frame(new Uint8Array(0)), flagged(0x02, frame(new Uint8Array(0)))]))],
  ["gRPC second envelope too large", grpc("GetCryptoKey", (s) => Buffer.concat([binary(GetCryptoKeyRequestSchema, { keyId: s.keyId }), Buffer.from([0, 0x7f, 0xff, 0xff, 0xff, 1])]))],
  ["gRPC second envelope cut short", grpc("GetCryptoKey", (s) => Buffer.concat([binary(GetCryptoKeyRequestSchema, { keyId: s.keyId }), Buffer.from([0, 0, 0, 0, 9, 1])]))],
  // A first message over its limits (1,001 unknown fields) with bytes after it: refused for those bytes on both paths
  // (Connect's counted the message first).
  ["gRPC over the limits, then bytes", grpc("GetCryptoKey", () => Buffer.concat([frame(unknownFields(1001)), Buffer.from([1, 2, 3])]))],
  ["gRPC over the limits, twice", grpc("GetCryptoKey", () => Buffer.concat([frame(unknownFields(1001)), frame(unknownFields(1001))]))],
  ["gRPC a message, then a header declaring 5 MiB", grpc("GetCryptoKey", (s) => Buffer.concat([binary(GetCryptoKeyRequestSchema, { keyId: s.keyId }), Buffer.from([0, 0, 0x50, 0, 0])]))],
  ["gRPC field violation", grpc("Encrypt", () => binary(EncryptRequestSchema, { keyId: "", keyVersionId: 0 }))],
  // Counted before decoding (src/transport/limits/): 65 labels, and 1,001 unknown fields.
  ["gRPC over a declared limit", grpc("CreateCryptoKey", () => binary(CreateCryptoKeyRequestSchema, { parentId: "p", labels: Array(65).fill("l") }))],
  ["gRPC too many unknown fields", grpc("CreateCryptoKey", () => frame(Buffer.alloc(1_001 * 3).fill(Buffer.from([0xf8, 0x07, 0]))))],
  ["gRPC unknown resource", grpc("GetCryptoKey", () => binary(GetCryptoKeyRequestSchema, { keyId: "no-such-key" }))],
  ["gRPC state conflict", grpc("DisableCryptoKeyVersion", (s) => binary(DisableCryptoKeyVersionRequestSchema, { keyId: s.keyId, keyVersionId: 1 }))],
  ["gRPC internal", grpc("Encrypt", (s) => binary(EncryptRequestSchema, { keyId: s.keyId, keyVersionId: FAULT, plaintext: Buffer.from("x") }))],
  ["gRPC unauthenticated (a token the server never issued)", async (side) => {
    const res = await rawCall(side.server.url, "/kms.v1.KeyManagerService/GetCryptoKey", binary(GetCryptoKeyRequestSchema, { keyId: side.keyId }), { "x-request-id": "eq-1", authorization: "Bearer not-a-token" });
    return masked(side, { headers: res.headers, trailers: res.trailers, body: res.body.toString("base64") });
  }],
  ["gRPC deadline already passed", async (side) => {
    const res = await rawCall(side.server.url, "/kms.v1.KeyManagerService/CreateCryptoKey", binary(CreateCryptoKeyRequestSchema, { parentId: "eq-late" }), { "x-request-id": "eq-1", "grpc-timeout": "0m" });
    return masked(side, { headers: res.headers, trailers: res.trailers });
  }],
  // A timeout header not of its form: INVALID_ARGUMENT, PROTOCOL_ERROR (docs/errors.md), before the body is read.
  ["gRPC invalid grpc-timeout", grpc("GetCryptoKey", (s) => binary(GetCryptoKeyRequestSchema, { keyId: s.keyId }), { "grpc-timeout": "abc" })],
  ["gRPC invalid grpc-timeout and bad protobuf", grpc("CreateCryptoKey", () => frame(Buffer.from([0x0a, 0x05, 0x61])), { "grpc-timeout": "1.5S" })],
  ["gRPC invalid connect-timeout-ms, which the deadline stage reads", grpc("GetCryptoKey", (s) => binary(GetCryptoKeyRequestSchema, { keyId: s.keyId }), { "connect-timeout-ms": "-1" })],
  ["REST success", rest("GET", (s) => `/v1/keys/${s.keyId}`)],
  ["REST invalid grpc-timeout", rest("GET", (s) => `/v1/keys/${s.keyId}`, undefined, { "grpc-timeout": "abc" })],
  ["REST invalid connect-timeout-ms", rest("POST", () => "/v1/keys", () => JSON.stringify({ parentId: "eq-timeout" }), { "connect-timeout-ms": "-1" })],
  ["REST deadline already passed", rest("POST", () => "/v1/keys", () => JSON.stringify({ parentId: "eq-late" }), { "connect-timeout-ms": "0" })],
  ["REST oversize", rest("POST", () => "/v1/keys", () => Buffer.alloc(4 * MIB + 1, 0x20))],
  ["REST malformed JSON", rest("POST", () => "/v1/keys", () => '{"parentId": ')],
  ["REST unknown field", rest("POST", () => "/v1/keys", () => JSON.stringify({ parentId: "p", secretNote: 1 }))],
  ["REST field violation", rest("POST", () => "/v1/encrypt", () => JSON.stringify({ keyId: "", plaintext: "" }))],
  ["REST over a declared limit", rest("POST", () => "/v1/keys", () => JSON.stringify({ parentId: "p", labels: Array(65).fill("l") }))],
  ["REST unknown resource", rest("GET", () => "/v1/keys/no-such-key")],
  ["REST state conflict", rest("POST", (s) => `/v1/keys/${s.keyId}/versions/1:disable`, () => "{}")],
  ["REST unauthenticated (no credentials)", rest("GET", (s) => `/v1/keys/${s.keyId}`, undefined, {}, false)],
  ["REST internal", rest("POST", () => "/v1/encrypt", (s) => JSON.stringify({ keyId: s.keyId, keyVersionId: FAULT, plaintext: "eA==" }))],
];

describe("the direct adapters answer as connect-node does", () => {
  const sides: Record<"direct" | "connect", Side> = {} as never;

  beforeAll(async () => {
    for (const callPath of ["direct", "connect"] as const) {
      const server = await startServer({ env: { CALL_PATH: callPath }, stages: [injectFault] });
      const client = createClient(KeyManagerService, createGrpcTransport({ baseUrl: server.url, interceptors: [adminAuthInterceptor(server.url)] }));
      const key = await client.createCryptoKey({ parentId: "equivalence", name: "k" });
      sides[callPath] = { server, keyId: key.id };
    }
  });
  afterAll(async () => {
    for (const side of Object.values(sides)) await side.server.stop();
  });

  it.each(cases)("%s", async (_name, probe) => {
    const direct = await probe(sides.direct);
    const reference = await probe(sides.connect);
    expect(direct).toEqual(reference);
  });

  it("covers every class of error with a status of its own", async () => {
    const codes = new Set<unknown>();
    for (const [name, probe] of cases) {
      const seen = (await probe(sides.direct)) as { trailers?: Record<string, string>; headers?: Record<string, string>; status?: number };
      codes.add(name.startsWith("gRPC") ? (seen.trailers?.["grpc-status"] ?? seen.headers?.["grpc-status"]) : seen.status);
    }
    // OK, RESOURCE_EXHAUSTED, INVALID_ARGUMENT, UNIMPLEMENTED, NOT_FOUND, FAILED_PRECONDITION, INTERNAL,
    // DEADLINE_EXCEEDED, UNAUTHENTICATED; 200, 413, 400, 404, 409?/400, 401, 500 over REST.
    expect([...codes].filter((c) => typeof c === "string").sort()).toEqual(["0", "13", "3", "4", "5", "8", "9", "12", "16"].sort());
    expect(codes).toContain(401);
    expect(sides.direct.server.logs()).toContain("injected fault");
  });
});

// A refusal that carries headers a stage added: the rate-limit stage's X-RateLimit-* (a probe, 2026-11-27, found the
// direct path sending them in the headers as well as the trailers, the reference in the trailers only).
describe("a rate-limited gRPC call answers alike on both paths", () => {
  const sides: Record<"direct" | "connect", Side> = {} as never;
  const env = { RATE_LIMIT_SERVICES: "kms.v1.KeyManagerService", RATE_LIMIT_GET_PER_MINUTE: "1", RATE_LIMIT_GET_PER_DAY: "100" };

  beforeAll(async () => {
    for (const callPath of ["direct", "connect"] as const) {
      const server = await startServer({ env: { CALL_PATH: callPath, ...env } });
      const client = createClient(KeyManagerService, createGrpcTransport({ baseUrl: server.url, interceptors: [adminAuthInterceptor(server.url)] }));
      const key = await client.createCryptoKey({ parentId: "equivalence", name: "k" });
      sides[callPath] = { server, keyId: key.id };
    }
  });
  afterAll(async () => {
    for (const side of Object.values(sides)) await side.server.stop();
  });

  it("in headers, trailers and status", async () => {
    const probe = async (side: Side): Promise<unknown> => {
      const call = () => rawCall(side.server.url, "/kms.v1.KeyManagerService/GetCryptoKey", binary(GetCryptoKeyRequestSchema, { keyId: side.keyId }), { "x-request-id": "eq-1", ...adminAuth(side.server.url) });
      expect((await call()).trailers["grpc-status"]).toBe("0");
      const refused = await call();
      // Seconds to the window's end: the two servers' windows opened a moment apart.
      const seconds = (headers: object) => ({ ...headers, ...("x-ratelimit-reset" in headers ? { "x-ratelimit-reset": "<s>" } : {}) });
      return masked(side, { headers: seconds(refused.headers), trailers: seconds(refused.trailers) });
    };
    const direct = (await probe(sides.direct)) as { headers: Record<string, string>; trailers: Record<string, string> };
    expect(direct.trailers["grpc-status"]).toBe("8");
    expect(direct.trailers["x-ratelimit-limit"]).toBe("1");
    expect(direct).toEqual(await probe(sides.connect));
  });
});
