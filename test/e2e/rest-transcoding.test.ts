import http from "node:http";
import { BodyBudget } from "../../src/transport/limits/body-budget.js";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create, fromBinary } from "@bufbuild/protobuf";
import type { DescMessage } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  BadRequestSchema,
  ErrorInfoSchema,
  PreconditionFailureSchema,
  RetryInfoSchema,
} from "../../gen/google/rpc/error_details_pb.js";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import type { EncryptRequest, GetCryptoKeyRequest, ListCryptoKeysRequest, UpdateCryptoKeyRequest } from "../../gen/kms/v1/kms_pb.js";
import { DomainError, failedPrecondition } from "../../src/errors/domain-error.js";
import { createLogger } from "../../src/logger.js";
import type { UnaryHandler } from "../../src/pipeline/handlers.js";
import type { Stage } from "../../src/pipeline/stage.js";
import { stagesWithoutAccess } from "../support/method-table.js";
import { createRestHandler } from "../../src/transport/rest/rest-handler.js";
import { RouteTable } from "../../src/transport/rest/route-table.js";
import { methodTableOf } from "../support/method-table.js";
import { ItemService } from "../unit/rest-fixture.js";

const MAX = 4 * 1024 * 1024;

// The request id each call had in the pipeline, to check that the REST layer answers with the same one.
const handlerRequestIds: string[] = [];
const recordRequestId: Stage = (call, next) => {
  handlerRequestIds.push(call.requestId);
  return next(call);
};

let abortedCalls = 0;
let startedSlowCall: () => void = () => {};

function rateLimited(seconds: number): DomainError {
  return new DomainError({
    code: "resource_exhausted",
    // Any reason of a refusal to retry later; the rate-limit stage brings its own.
    reason: "NODE_CAPACITY_EXHAUSTED",
    domain: "compute",
    message: "rate limit exceeded",
    violations: [{ subject: "caller", description: "100 per minute" }],
    retryAfterSeconds: seconds,
  });
}

// A fake KeyManagerService that echoes what it was given, plus the test service of the unit tests.
const kmsHandlers: Record<string, UnaryHandler> = {
  getCryptoKey(req, call) {
    call.addResponseHeader("x-ratelimit-remaining", "99");
    return { id: (req as GetCryptoKeyRequest).keyId, description: call.headers.get("authorization") ?? "" };
  },
  updateCryptoKey(request) {
    const req = request as UpdateCryptoKeyRequest;
    return { id: req.key?.id, name: req.key?.name, labels: req.key?.labels, description: req.updateMask?.paths.join(",") };
  },
  listCryptoKeys(request) {
    const req = request as ListCryptoKeysRequest;
    return { keys: [{ id: req.parentId, name: `${req.page?.limit}/${req.page?.offset}` }] };
  },
  encrypt(request) {
    const req = request as EncryptRequest;
    if (req.keyId === "disabled") {
      throw failedPrecondition("kms", "CRYPTO_KEY_VERSION_NOT_ENABLED", "keys/disabled/versions/1", "key version 1 is not enabled");
    }
    return { keyId: req.keyId, keyVersionId: req.keyVersionId, ciphertext: req.plaintext };
  },
  decrypt(_req, call) {
    call.addResponseHeader("x-ratelimit-limit", "100");
    throw rateLimited(1.5);
  },
  destroyCryptoKey(_req, call) {
    call.addResponseHeader("retry-after", "7");
    throw rateLimited(1);
  },
  getCryptoKeyVersion() {
    throw new Error("boom: secret internals");
  },
  async createCryptoKeyVersion(_req, call) {
    startedSlowCall();
    await new Promise<void>((resolve) => call.signal.addEventListener("abort", () => resolve()));
    abortedCalls++;
    return {};
  },
};
const itemHandlers: Record<string, UnaryHandler> = {
  listItems: (req) => req,
  getEnvelope: (req) => ({ ...req, payload: anyPack(ErrorInfoSchema, create(ErrorInfoSchema, { reason: "X", domain: "kms" })) }),
};

let server: http.Server;
let h2server: http2.Http2Server;
let base = "";
let h2base = "";

beforeAll(async () => {
  const logger = createLogger("silent");
  const stages = [...stagesWithoutAccess(logger), recordRequestId];
  const table = methodTableOf([KeyManagerService, ItemService], { ...kmsHandlers, ...itemHandlers }, stages);
  const rest = createRestHandler({ routes: new RouteTable(table), maxBodyBytes: MAX, bodyBudget: new BodyBudget(64 * 1024 * 1024), logger, viaConnect: null });
  const handler = (req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse) =>
    void rest(req as never, res as never);
  server = http.createServer(handler);
  h2server = http2.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  await new Promise<void>((resolve) => h2server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  h2base = `http://127.0.0.1:${(h2server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await new Promise((resolve) => h2server.close(resolve));
});

const json = { "content-type": "application/json" };

async function call(method: string, path: string, body?: string, headers: Record<string, string> = json) {
  const res = await fetch(base + path, { method, body, headers });
  return { path, status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

interface StatusBody {
  code: number;
  message: string;
  details: { typeUrl: string; value: string }[];
}

function detail<D extends DescMessage>(body: Record<string, unknown>, desc: D) {
  const status = body as unknown as StatusBody;
  const found = status.details.find((d) => d.typeUrl === `type.googleapis.com/${desc.typeName}`);
  if (found === undefined) throw new Error(`no ${desc.typeName} in ${JSON.stringify(body)}`);
  return fromBinary(desc, base64Decode(found.value));
}

async function expectInvalid(res: Awaited<ReturnType<typeof call>>, reason: string, field: string) {
  expect(res.status).toBe(400);
  expect(res.headers.get("content-type")).toBe("application/json");
  expect(res.body["code"]).toBe(3);
  // The domain of the route's service: kms for KeyManagerService, none for the test service.
  expect(detail(res.body, ErrorInfoSchema)).toMatchObject({ reason, domain: res.path.startsWith("/v1/") ? "kms" : "cloudplane" });
  expect(detail(res.body, BadRequestSchema).fieldViolations[0]?.field).toBe(field);
}

describe("successful calls", () => {
  test("path variable, credentials, headers the handler added", async () => {
    const res = await call("GET", "/v1/keys/k%201", undefined, { authorization: "Bearer t0k", "x-request-id": "rid-1" });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: "k 1", description: "Bearer t0k" });
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(res.headers.get("x-request-id")).toBe("rid-1");
    expect(handlerRequestIds.at(-1)).toBe("rid-1");
    expect(res.headers.get("x-ratelimit-remaining")).toBe("99");
    expect([...res.headers.keys()].filter((h) => /^(connect-|grpc-|trailer-|content-encoding)/.test(h))).toEqual([]);
  });

  test("nested {key.id} with a body and a field mask", async () => {
    const res = await call("PATCH", "/v1/keys/k1", JSON.stringify({ key: { name: "n", labels: ["a"] }, updateMask: "name,labels" }));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: "k1", name: "n", labels: ["a"], description: "name,labels" });
  });

  test("dotted query parameters", async () => {
    const res = await call("GET", "/v1/keys?parentId=ns&page.limit=5&page.offset=10");
    expect(res.body).toEqual({ keys: [{ id: "ns", name: "5/10" }] });
  });

  test("repeated query parameters", async () => {
    const res = await call("GET", "/v1/shelves/s1/items?filter.tags=a&filter.tags=b&filter.kinds=LARGE&filter.kinds=1&filter.active=true");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ shelf: "s1", filter: { tags: ["a", "b"], kinds: ["LARGE", "SMALL"], active: true } });
  });

  test('proto names and "1" for an int32', async () => {
    const res = await call("POST", "/v1/encrypt", JSON.stringify({ key_id: "k", key_version_id: "1", plaintext: "aGk-" }));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ keyId: "k", keyVersionId: 1, ciphertext: "aGk+" });
  });

  test("Any in a response is typeUrl/value", async () => {
    const res = await call("GET", "/v1/envelopes/n1");
    const payload = res.body["payload"] as { typeUrl: string; value: string };
    expect(payload.typeUrl).toBe("type.googleapis.com/google.rpc.ErrorInfo");
    expect(fromBinary(ErrorInfoSchema, base64Decode(payload.value))).toMatchObject({ reason: "X", domain: "kms" });
    expect(res.body["note"]).toBe("n1");
  });

  test("a body of exactly the limit is read", async () => {
    const head = '{"keyId":"k","plaintext":"';
    const body = head + "A".repeat(MAX - head.length - 2) + '"}';
    expect(body.length).toBe(MAX);
    const res = await call("POST", "/v1/encrypt", body);
    expect(res.status).toBe(200);
  });
});

describe("rejected requests", () => {
  test("unknown JSON field", async () => {
    await expectInvalid(await call("POST", "/v1/encrypt", '{"bogus":1}'), "UNKNOWN_FIELD", "bogus");
    await expectInvalid(await call("PATCH", "/v1/keys/k1", '{"key":{"bogus":1}}'), "UNKNOWN_FIELD", "key.bogus");
  });

  test("unknown query parameter", async () => {
    await expectInvalid(await call("GET", "/v1/keys?parentId=a&bogus=1"), "UNKNOWN_FIELD", "bogus");
  });

  test("path and body disagree", async () => {
    await expectInvalid(await call("PATCH", "/v1/keys/k1", '{"key":{"id":"k2"}}'), "FIELD_MISMATCH", "key.id");
  });

  test("a value that does not fit the field", async () => {
    await expectInvalid(await call("GET", "/v1/keys?page.limit=x"), "REQUEST_INVALID", "page.limit");
    await expectInvalid(await call("GET", "/v1/keys/k1/versions/abc"), "REQUEST_INVALID", "keyVersionId");
  });

  test("an integer of the path or query that is not decimal digits, which proto-JSON would read as a number", async () => {
    for (const text of ["0x1", "0b1", "0o1", "1e0", "1.0", "+1", " 1"]) {
      const path = await call("GET", `/v1/keys/k1/versions/${encodeURIComponent(text)}`);
      await expectInvalid(path, "REQUEST_INVALID", "keyVersionId");
      expect(path.body["message"], text).toBe("keyVersionId: invalid value in the URL path; expected a 32-bit integer (number or decimal string)");
      await expectInvalid(await call("GET", `/v1/keys?parentId=a&page.limit=${encodeURIComponent(text)}`), "REQUEST_INVALID", "page.limit");
    }
  });

  test("malformed JSON", async () => {
    const res = await call("POST", "/v1/encrypt", '{"plaintext": "c2VjcmV0');
    await expectInvalid(res, "MALFORMED_BODY", "");
    expect(res.body["message"]).toBe("the request body is not valid JSON");
  });

  test("wrong content type", async () => {
    const res = await call("POST", "/v1/encrypt", "keyId=k", { "content-type": "application/x-www-form-urlencoded" });
    await expectInvalid(res, "UNSUPPORTED_CONTENT_TYPE", "");
  });

  test("a body over the limit is 413", async () => {
    const res = await call("POST", "/v1/encrypt", "x".repeat(MAX + 1));
    expect(res.status).toBe(413);
    expect(res.body["code"]).toBe(8);
    expect(detail(res.body, ErrorInfoSchema).reason).toBe("REQUEST_TOO_LARGE");
    expect(res.headers.get("retry-after")).toBeNull();
  });

  // 64 MiB offered, 4 MiB allowed: the refusal comes long before the end, whatever the socket buffers and the
  // client's own queue hold (with 16 MiB offered, a loaded CI machine once let the client pull all of it first).
  test("a streamed body without Content-Length is cut off at the limit", async () => {
    const chunk = new Uint8Array(1024 * 1024);
    const offered = 64;
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < offered) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const res = await fetch(`${base}/v1/encrypt`, { method: "POST", body: stream, headers: json, duplex: "half" } as RequestInit);
    expect(res.status).toBe(413);
    expect(sent).toBeLessThan(offered);
  });

  test("unknown route, answered with the caller's request id", async () => {
    const res = await call("GET", "/v1/nothing-here", undefined, { "x-request-id": "lost-1" });
    expect(res.status).toBe(404);
    expect(res.headers.get("x-request-id")).toBe("lost-1");
    expect(res.body["code"]).toBe(5);
    expect(detail(res.body, ErrorInfoSchema).reason).toBe("ROUTE_NOT_FOUND");
  });

  test("known path, other method", async () => {
    const res = await call("PUT", "/v1/keys/k1", "{}");
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("DELETE, GET, HEAD, PATCH");
    expect(res.body["code"]).toBe(12);
    expect(detail(res.body, ErrorInfoSchema).reason).toBe("METHOD_NOT_ALLOWED");
  });
});

describe("errors of the handlers", () => {
  test("a DomainError is rendered as google.rpc.Status with its details", async () => {
    const res = await call("POST", "/v1/encrypt", JSON.stringify({ keyId: "disabled", keyVersionId: 1, plaintext: "aGk=" }));
    expect(res.status).toBe(400);
    // No id from the caller: the REST layer makes one, and the handler saw the same.
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(handlerRequestIds.at(-1)).toBe(res.headers.get("x-request-id"));
    const body = res.body as unknown as StatusBody;
    expect(body.code).toBe(9);
    expect(body.message).toBe("key version 1 is not enabled");
    expect(body.details.map((d) => d.typeUrl)).toEqual([
      "type.googleapis.com/google.rpc.ErrorInfo",
      "type.googleapis.com/google.rpc.PreconditionFailure",
    ]);
    expect(detail(res.body, ErrorInfoSchema)).toMatchObject({ reason: "CRYPTO_KEY_VERSION_NOT_ENABLED", domain: "kms" });
    expect(detail(res.body, PreconditionFailureSchema).violations[0]).toMatchObject({ type: "STATE", subject: "keys/disabled/versions/1" });
  });

  test("RESOURCE_EXHAUSTED is 429 with Retry-After from RetryInfo and the handler's headers", async () => {
    const res = await call("POST", "/v1/decrypt", "{}");
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("2");
    expect(res.headers.get("x-ratelimit-limit")).toBe("100");
    expect(res.body["code"]).toBe(8);
    expect(detail(res.body, RetryInfoSchema).retryDelay?.nanos).toBe(500_000_000);
  });

  test("a Retry-After set by the handler wins", async () => {
    const res = await call("DELETE", "/v1/keys/k1");
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("7");
  });

  test("a fault is INTERNAL without its internals", async () => {
    const res = await call("GET", "/v1/keys/k1/versions/1");
    expect(res.status).toBe(500);
    expect(res.body["code"]).toBe(13);
    // The request id to quote, the one the response carries.
    expect(String(res.body["message"])).toContain(res.headers.get("x-request-id"));
    expect(JSON.stringify(res.body)).not.toContain("boom");
  });
});

test("nothing a caller sends produces a 5xx", async () => {
  const odd: [string, string, string?, Record<string, string>?][] = [
    ["GET", "/v1/keys/%ZZ"],
    ["GET", "/v1/keys?%ZZ=1&parentId=%"],
    ["GET", "/v1/keys?page.limit=99999999999"],
    ["GET", "/v1/keys?page.limit"],
    ["GET", "/v1/keys?page.limit.x=1"],
    ["GET", "/v1/keys?=&&"],
    ["GET", "/v1/keys/k1/versions/1e400"],
    ["GET", "/v1/keys//versions/1"],
    ["OPTIONS", "/v1/keys"],
    ["POST", "/v1/encrypt", `{"keyId":${"[".repeat(100_000)}`],
    ["POST", "/v1/encrypt", '{"plaintext":{"a":1}}'],
    ["POST", "/v1/encrypt", "null"],
    ["POST", "/v1/encrypt", '"text"'],
    ["POST", "/v1/encrypt", "\uFEFF{}"],
    ["POST", "/v1/encrypt", '{"keyVersionId":1.5}'],
    ["POST", "/v1/encrypt", '{"keyVersionId":"1", "key_version_id":2}'],
    ["PATCH", "/v1/keys/k1", '{"key":{"primary":{"state":"NOPE"}},"updateMask":{"paths":["a"]}}'],
    ["PATCH", "/v1/keys/k1", '{"key":{"rotationPeriod":"-99999999999999999999s"}}'],
    ["GET", "/v1/keys/k1", undefined, { "connect-timeout-ms": "abc", "grpc-timeout": "x", "content-type": "text/html" }],
  ];
  for (const [method, path, body, headers] of odd) {
    const res = await fetch(base + path, { method, body, headers: headers ?? json });
    expect(res.status, `${method} ${path} ${body ?? ""}`).toBeLessThan(500);
    expect(res.headers.get("content-type")).toBe("application/json");
  }
  const bytes = await fetch(`${base}/v1/encrypt`, { method: "POST", body: new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), headers: json });
  expect(bytes.status).toBe(400);
});

test("a client that goes away aborts the in-process call", async () => {
  const started = new Promise<void>((resolve) => (startedSlowCall = resolve));
  const controller = new AbortController();
  const pending = fetch(`${base}/v1/keys/k1/versions`, { method: "POST", body: "{}", headers: json, signal: controller.signal });
  await started;
  controller.abort();
  await expect(pending).rejects.toThrow();
  await expect.poll(() => abortedCalls).toBe(1);
});

test("HTTP/2 (h2c) callers get the same answers", async () => {
  const session = http2.connect(h2base);
  const request = (path: string, method = "GET") =>
    new Promise<{ status: number; headers: http2.IncomingHttpHeaders; body: string }>((resolve, reject) => {
      const stream = session.request({ ":path": path, ":method": method });
      let body = "";
      let headers: http2.IncomingHttpHeaders = {};
      stream.on("response", (h) => (headers = h));
      stream.setEncoding("utf8");
      stream.on("data", (chunk: string) => (body += chunk));
      stream.on("end", () => resolve({ status: Number(headers[":status"]), headers, body }));
      stream.on("error", reject);
      stream.end();
    });
  try {
    const ok = await request("/v1/keys/k1");
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body)).toEqual({ id: "k1" });
    expect(ok.headers["x-ratelimit-remaining"]).toBe("99");
    const notAllowed = await request("/v1/keys/k1", "PUT");
    expect(notAllowed.status).toBe(405);
    expect(notAllowed.headers["allow"]).toBe("DELETE, GET, HEAD, PATCH");
  } finally {
    session.close();
  }
});
