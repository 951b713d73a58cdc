import http2 from "node:http2";
import { fromBinary } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { frame, rawCall } from "../support/raw-grpc.js";
import { rawRequest } from "../support/raw-http1.js";
import { http2Request } from "../support/raw-http2.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { ACCEPT } from "./vcd-helpers.js";

// HTTP/2's :authority and Host, held to the form the HTTP/1.1 Host header is (docs/callers.md, "HTTP as RFC 9110 and
// 9112 have it"): a probe found `host: evil.test` beside the real :authority, and `:authority: u@evil.test`, served
// with every virtualization API link naming evil.test. Over h2c, status, headers and body exact.

let server: TestServer;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server.stop();
});

const h2 = (headers: http2.OutgoingHttpHeaders, body?: Buffer) => http2Request(server.url, headers, body);

// The REST error body, its ErrorInfo and BadRequest decoded.
function refusal(body: string): unknown {
  const json = JSON.parse(body) as { code: number; message: string; details: { typeUrl: string; value: string }[] };
  expect(json.details.map((d) => d.typeUrl)).toEqual(["type.googleapis.com/google.rpc.ErrorInfo", "type.googleapis.com/google.rpc.BadRequest"]);
  const info = fromBinary(ErrorInfoSchema, base64Decode(json.details[0]!.value));
  const bad = fromBinary(BadRequestSchema, base64Decode(json.details[1]!.value));
  return { code: json.code, message: json.message, reason: info.reason, domain: info.domain, violations: bad.fieldViolations.map((v) => ({ field: v.field, description: v.description })) };
}

function protocolRefusal(domain: string, message: string): unknown {
  return { code: 3, message, reason: "PROTOCOL_ERROR", domain, violations: [{ field: "", description: message }] };
}

const BAD_AUTHORITY = "the :authority must be a host name or address, with an optional port and no user information (RFC 9113, section 8.3.1)";
const HOST_DIFFERS = "the Host header must name the :authority of the request, if sent (RFC 9113, section 8.3.1)";
const BAD_HOST = "the Host header must be a host name or address, with an optional port (RFC 9110, section 7.2)";

const query = (extra: http2.OutgoingHttpHeaders): http2.OutgoingHttpHeaders => ({
  ":path": "/api/query?type=vAppTemplate&pageSize=1",
  authorization: `Bearer ${server.token}`,
  accept: ACCEPT,
  "x-request-id": "authority-1",
  ...extra,
});

// The virtualization API's Error document for a refusal before any version was agreed.
function vcdError(message: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Error xmlns="http://www.vmware.com/vcloud/v1.5" majorErrorCode="400" minorErrorCode="BAD_REQUEST" message="${message}" vendorSpecificErrorCode="PROTOCOL_ERROR"/>`;
}

describe("the virtualization API over HTTP/2", () => {
  test("a Host header that differs from :authority is refused, not written into the links", async () => {
    const answer = await h2(query({ ":authority": `127.0.0.1:${server.port}`, host: "evil.test" }));
    expect(answer.status).toBe(400);
    expect(answer.headers["content-type"]).toBe("application/xml");
    expect(answer.headers["x-request-id"]).toBe("authority-1");
    expect(answer.body).toBe(vcdError(HOST_DIFFERS));
  });

  test("an :authority with user information is refused", async () => {
    const answer = await h2(query({ ":authority": "u@evil.test" }));
    expect(answer.status).toBe(400);
    expect(answer.body).toBe(vcdError(BAD_AUTHORITY));
  });

  test("the links name the :authority, and a Host header that agrees with it is taken", async () => {
    for (const extra of [{ ":authority": "example.test:8443" }, { ":authority": "Example.test:8443", host: "example.TEST:8443" }]) {
      const answer = await h2(query(extra));
      expect(answer.status).toBe(200);
      const hrefs = [...answer.body.matchAll(/href="([^"]*)"/g)].map((m) => m[1]!);
      expect(hrefs.length).toBeGreaterThan(2);
      for (const href of hrefs) expect(href.toLowerCase().startsWith("https://example.test:8443/api/")).toBe(true);
    }
  });
});

describe("every other surface over HTTP/2", () => {
  test("REST, the health probe and the RPC protocols refuse a bad :authority or Host with the JSON Status, in the route's domain", async () => {
    const cases: [http2.OutgoingHttpHeaders, string, string][] = [
      [{ ":method": "GET", ":path": "/v1/keys/k", ":authority": "u@evil.test" }, "kms", BAD_AUTHORITY],
      [{ ":method": "GET", ":path": "/v1/keys/k", ":authority": "127.0.0.1", host: "evil.test" }, "kms", HOST_DIFFERS],
      [{ ":method": "GET", ":path": "/healthz", ":authority": "127.0.0.1", host: "u@127.0.0.1" }, "cloudplane", BAD_HOST],
      [{ ":method": "POST", ":path": "/kms.v1.KeyManagerService/ListCryptoKeys", "content-type": "application/json", "connect-protocol-version": "1", ":authority": "u@evil.test" }, "kms", BAD_AUTHORITY],
      // gRPC, which the direct adapter serves before a stream becomes a request, and gRPC-web.
      [{ ":method": "POST", ":path": "/kms.v1.KeyManagerService/ListCryptoKeys", "content-type": "application/grpc", te: "trailers", ":authority": "u@evil.test" }, "kms", BAD_AUTHORITY],
      [{ ":method": "POST", ":path": "/kms.v1.KeyManagerService/ListCryptoKeys", "content-type": "application/grpc+json", te: "trailers", ":authority": "127.0.0.1", host: "evil.test" }, "kms", HOST_DIFFERS],
      [{ ":method": "POST", ":path": "/kms.v1.KeyManagerService/ListCryptoKeys", "content-type": "application/grpc-web+proto", ":authority": "127.0.0.1", host: "evil.test" }, "kms", HOST_DIFFERS],
    ];
    for (const [headers, domain, message] of cases) {
      const body = String(headers["content-type"] ?? "").startsWith("application/grpc") ? frame(new Uint8Array(0)) : undefined;
      const answer = await h2({ authorization: `Bearer ${server.token}`, "x-request-id": "authority-2", ...headers }, body);
      expect(answer.status, JSON.stringify(headers)).toBe(400);
      expect(answer.headers["content-type"]).toBe("application/json");
      expect(answer.headers["x-request-id"]).toBe("authority-2");
      expect(answer.headers["grpc-status"]).toBeUndefined();
      expect(refusal(answer.body), JSON.stringify(headers)).toEqual(protocolRefusal(domain, message));
    }
  });

  // A credential header sent twice names no one caller: an x-api-key sent twice was joined with ", " on one call path
  // and its first value taken on the other (a probe, 2026-11-28). Refused before any surface reads it: in the RPC
  // protocol of the request when it has one (gRPC metadata may repeat a key), else as the JSON Status.
  test("a credential header sent twice is refused on every protocol, in the route's domain", async () => {
    for (const name of ["x-api-key", "x-workspace-id"]) {
      const message = `the ${name} header must be sent once, not several times: the request must name one caller`;
      const twice = { [name]: ["one", "two"], authorization: `Bearer ${server.token}`, "x-request-id": "credentials-1" };
      const rest = await h2({ ":method": "GET", ":path": "/v1/keys/k", ...twice });
      expect([name, rest.status, rest.headers["x-request-id"]]).toEqual([name, 400, "credentials-1"]);
      expect(refusal(rest.body)).toEqual(protocolRefusal("kms", message));
      for (const [path, domain] of [
        ["/kms.v1.KeyManagerService/GetCryptoKey", "kms"],
        ["/compute.configs.v2.ConfigService/ListConfigs", "compute"],
      ] as const) {
        const grpc = await rawCall(server.url, path, frame(new Uint8Array(0)), { [name]: ["one", "two"], "x-request-id": "credentials-1" });
        expect([path, grpc.headers[":status"], grpc.trailers["grpc-status"], decodeURIComponent(String(grpc.trailers["grpc-message"]))]).toEqual([path, 200, "3", message]);
        const details = fromBinary(StatusSchema, Buffer.from(String(grpc.trailers["grpc-status-details-bin"]), "base64"));
        expect(details.details.map((d) => d.typeUrl)).toContain("type.googleapis.com/google.rpc.ErrorInfo");
        const info = fromBinary(ErrorInfoSchema, details.details.find((d) => d.typeUrl.endsWith("ErrorInfo"))!.value);
        expect([info.reason, info.domain]).toEqual(["PROTOCOL_ERROR", domain]);
        expect(grpc.trailers["x-request-id"]).toBe("credentials-1");
      }
      const connect = await h2({ ":method": "POST", ":path": "/kms.v1.KeyManagerService/GetCryptoKey", "content-type": "application/json", "connect-protocol-version": "1", ...twice }, Buffer.from("{}"));
      expect([connect.status, (JSON.parse(connect.body) as { code: string; message: string })]).toEqual([400, expect.objectContaining({ code: "invalid_argument", message })]);
    }
  });

  test("a gRPC call with a good :authority is served on the direct path", async () => {
    const answer = await h2({ ":method": "POST", ":path": "/grpc.health.v1.Health/Check", "content-type": "application/grpc", te: "trailers", ":authority": `localhost:${server.port}`, host: `LOCALHOST:${server.port}` }, frame(new Uint8Array(0)));
    expect(answer.status).toBe(200);
    expect(answer.headers["content-type"]).toBe("application/grpc+proto");
  });
});

// The refusal names the domain of the method an RPC path names, as it does a REST route's; it was "cloudplane".
test("over HTTP/1.1 too, a refused Connect call is in its service's domain", async () => {
  const answer = await rawRequest(
    server.port,
    "POST /kms.v1.KeyManagerService/ListCryptoKeys HTTP/1.1\r\nHost: u@evil.test\r\ncontent-type: application/json\r\nconnect-protocol-version: 1\r\ncontent-length: 2\r\n\r\n{}",
  );
  expect(answer.status).toBe(400);
  expect(answer.headers.connection).toBe("close");
  expect(refusal(answer.body)).toEqual(protocolRefusal("kms", BAD_HOST));
});
