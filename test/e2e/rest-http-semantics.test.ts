import http from "node:http";
import { gzipSync } from "node:zlib";
import { fromBinary } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// HTTP/1.1 semantics of the REST surface that a probe found wrong (docs/callers.md, "HTTP as RFC 9110 and 9112
// have it"): each answered over a real socket, status, headers and body exact.

let server: TestServer;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server.stop();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

function request(method: string, path: string, headers: http.OutgoingHttpHeaders, body?: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${server.url}${path}`, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

// The REST error body with its ErrorInfo and BadRequest decoded.
function refusal(body: Buffer): { code: number; message: string; reason: string; domain: string; violations: { field: string; description: string }[] } {
  const json = JSON.parse(body.toString()) as { code: number; message: string; details: { typeUrl: string; value: string }[] };
  expect(json.details.map((d) => d.typeUrl)).toEqual(["type.googleapis.com/google.rpc.ErrorInfo", "type.googleapis.com/google.rpc.BadRequest"]);
  const info = fromBinary(ErrorInfoSchema, base64Decode(json.details[0]!.value));
  const bad = fromBinary(BadRequestSchema, base64Decode(json.details[1]!.value));
  return {
    code: json.code,
    message: json.message,
    reason: info.reason,
    domain: info.domain,
    violations: bad.fieldViolations.map((v) => ({ field: v.field, description: v.description })),
  };
}

describe("a REST body with a Content-Encoding", () => {
  const json = Buffer.from('{"keyId":"k","keyVersionId":1,"plaintext":"aGk="}');
  const uncompressed = {
    code: 3,
    message: "a request body must be sent uncompressed (no Content-Encoding)",
    reason: "UNSUPPORTED_CONTENT_TYPE",
    domain: "kms",
    violations: [{ field: "", description: "a request body must be sent uncompressed (no Content-Encoding)" }],
  };

  // Real gzip bytes are not UTF-8: the body was refused as "not valid UTF-8", which blamed the caller's text.
  test.each([
    ["real gzip bytes", gzipSync(json)],
    ["a plain body", json],
  ])("%s is refused for its coding (400 UNSUPPORTED_CONTENT_TYPE)", async (_name, body) => {
    const answer = await request(
      "POST",
      "/v1/encrypt",
      { "content-type": "application/json", "content-encoding": "gzip", authorization: `Bearer ${server.token}` },
      body,
    );
    expect(answer.status).toBe(400);
    expect(answer.headers["content-type"]).toBe("application/json");
    expect(answer.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    expect(refusal(answer.body)).toEqual(uncompressed);
  });

  test("identity is no compression", async () => {
    const answer = await request(
      "POST",
      "/v1/encrypt",
      { "content-type": "application/json", "content-encoding": "identity", authorization: `Bearer ${server.token}` },
      Buffer.from([0xff, 0xfe]),
    );
    expect(answer.status).toBe(400);
    expect(refusal(answer.body)).toMatchObject({ reason: "MALFORMED_BODY", message: "the request body is not valid UTF-8" });
  });
});
