import http from "node:http";
import { fromBinary } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { http2Request } from "../support/raw-http2.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// An RPC path called with another HTTP method than its procedure takes (docs/errors.md, METHOD_NOT_ALLOWED):
// connect-node's router answered 405 with an empty body and no Allow header, which RFC 9110 15.5.6 requires. Now
// as the REST surface answers a route called so, over HTTP/1.1 and HTTP/2, status, headers and body exact.

let server: TestServer;

beforeAll(async () => {
  server = await startServer({ env: { CORS_ALLOWED_ORIGINS: "https://app.example" } });
});

afterAll(async () => {
  await server.stop();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function http1(method: string, path: string, headers: http.OutgoingHttpHeaders = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${server.url}${path}`, { method, headers: { "x-request-id": "method-1", ...headers }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

// Its answer as the HTTP/1.1 one reads, status, headers and body.
async function h2(method: string, path: string): Promise<Answer> {
  const { status, headers, body } = await http2Request(server.url, { ":method": method, ":path": path, "x-request-id": "method-1" });
  return { status, headers: headers as http.IncomingHttpHeaders, body };
}

// The REST Status JSON, its one ErrorInfo decoded.
function status(body: string): unknown {
  const json = JSON.parse(body) as { code: number; message: string; details: { typeUrl: string; value: string }[] };
  expect(json.details.map((d) => d.typeUrl)).toEqual(["type.googleapis.com/google.rpc.ErrorInfo"]);
  const info = fromBinary(ErrorInfoSchema, base64Decode(json.details[0]!.value));
  return { code: json.code, message: json.message, reason: info.reason, domain: info.domain, metadata: info.metadata };
}

const refused = (path: string, method: string, domain: string): unknown => ({
  code: 12,
  message: `${path} does not accept ${method}; allowed: POST`,
  reason: "METHOD_NOT_ALLOWED",
  domain,
  metadata: { allow: "POST" },
});

const LIST_KEYS = "/kms.v1.KeyManagerService/ListCryptoKeys";

describe("an RPC path called with a method it does not take", () => {
  test.each(["GET", "PUT", "PATCH", "DELETE", "OPTIONS"])("%s is 405 with Allow: POST and the JSON Status, over HTTP/1.1 and HTTP/2", async (method) => {
    for (const answer of [await http1(method, `${LIST_KEYS}?x=1`), await h2(method, `${LIST_KEYS}?x=1`)]) {
      expect(answer.status).toBe(405);
      expect(answer.headers.allow).toBe("POST");
      expect(answer.headers["content-type"]).toBe("application/json");
      expect(answer.headers["x-request-id"]).toBe("method-1");
      expect(Number(answer.headers["content-length"])).toBe(Buffer.byteLength(answer.body));
      expect(status(answer.body)).toEqual(refused(LIST_KEYS, method, "kms"));
    }
  });

  test("HEAD gets the 405 and its headers without a body", async () => {
    for (const answer of [await http1("HEAD", LIST_KEYS), await h2("HEAD", LIST_KEYS)]) {
      expect(answer.status).toBe(405);
      expect(answer.headers.allow).toBe("POST");
      expect(answer.headers["content-type"]).toBe("application/json");
      expect(answer.body).toBe("");
    }
  });

  test("the domain is the service's: compute, and the server's own for health", async () => {
    const pools = "/compute.cluster.v1.NodePoolService/ListNodePools";
    expect(status((await http1("GET", pools)).body)).toEqual(refused(pools, "GET", "compute"));
    const health = "/grpc.health.v1.Health/Check";
    expect(status((await h2("GET", health)).body)).toEqual(refused(health, "GET", "cloudplane"));
  });

  test("a CORS preflight of an allowed origin is still answered 204", async () => {
    const answer = await http1("OPTIONS", LIST_KEYS, { origin: "https://app.example", "access-control-request-method": "POST" });
    expect(answer.status).toBe(204);
    expect(answer.headers["access-control-allow-origin"]).toBe("https://app.example");
  });
});
