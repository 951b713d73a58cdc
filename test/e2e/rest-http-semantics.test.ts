import http from "node:http";
import type net from "node:net";
import { gzipSync } from "node:zlib";
import { fromBinary } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { refuseRequestTarget } from "../../src/transport/rest/request-target.js";
import { RouteTable } from "../../src/transport/rest/route-table.js";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { methodTableOf } from "../support/method-table.js";
import { rawRequest } from "../support/raw-http1.js";
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

function protocolRefusal(domain: string, message: string): unknown {
  return { code: 3, message, reason: "PROTOCOL_ERROR", domain, violations: [{ field: "", description: message }] };
}

const NO_HOST = "an HTTP/1.1 request must have a Host header (RFC 9112, section 3.2)";
const TWO_HOSTS = "an HTTP/1.1 request must have one Host header, not several (RFC 9112, section 3.2)";
const BAD_TARGET = "the request target must be a path, or an absolute http or https URI with a host (RFC 9112, section 3.2)";
const BAD_HOST = "the Host header must be a host name or address, with an optional port (RFC 9110, section 7.2)";

describe("the request target and Host header (RFC 9112 3.2)", () => {
  let keyId: string;
  beforeAll(async () => {
    const created = await request(
      "POST",
      "/v1/keys",
      { "content-type": "application/json", authorization: `Bearer ${server.token}` },
      Buffer.from('{"parentId":"targets"}'),
    );
    keyId = (JSON.parse(created.body.toString()) as { id: string }).id;
  });

  // A server MUST accept the absolute-form: it was 404 "no REST route matches GET http://x/v1/keys/...".
  test("an absolute-form target is served as the path it names", async () => {
    const answer = await rawRequest(
      server.port,
      `GET http://example.test/v1/keys/${keyId}?x-unused= HTTP/1.1\r\nHost: other\r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n`,
    );
    // The query is read as the origin-form's would be: an unknown parameter, named.
    expect(answer.status).toBe(400);
    expect(refusal(Buffer.from(answer.body))).toMatchObject({ reason: "UNKNOWN_FIELD", domain: "kms" });
    const ok = await rawRequest(
      server.port,
      `GET HTTP://example.test/v1/keys/${keyId} HTTP/1.1\r\nHost: example.test\r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n`,
    );
    expect(ok.status).toBe(200);
    expect(ok.headers["content-type"]).toBe("application/json");
    expect((JSON.parse(ok.body) as { id: string }).id).toBe(keyId);
  });

  test("an absolute target that is not an http URI with a host is 400 PROTOCOL_ERROR in JSON", async () => {
    // The authority takes the Host header's place, and is held to its form: "http://a:b:c/..." put a:b:c in every href.
    for (const target of ["ftp://example.test/v1/keys/k", "http:///v1/keys/k", "http://user@example.test/v1/keys/k", "http://a:b:c/v1/keys/k", "http://a%zz/v1/keys/k", "http://[::1/v1/keys/k"]) {
      const answer = await rawRequest(server.port, `GET ${target} HTTP/1.1\r\nHost: example.test\r\nx-request-id: target-1\r\n\r\n`);
      expect(answer.status).toBe(400);
      expect(answer.headers["content-type"]).toBe("application/json");
      expect(answer.headers["x-request-id"]).toBe("target-1");
      expect(answer.headers.connection).toBe("close");
      expect(refusal(Buffer.from(answer.body))).toEqual(protocolRefusal("cloudplane", BAD_TARGET));
    }
  });

  test("two Host headers on a REST route are 400 PROTOCOL_ERROR in JSON, in the route's domain", async () => {
    const answer = await rawRequest(server.port, `GET /v1/keys/${keyId} HTTP/1.1\r\nHost: a\r\nHost: b\r\nx-request-id: target-2\r\n\r\n`);
    expect(answer.status).toBe(400);
    expect(answer.headers["content-type"]).toBe("application/json");
    expect(answer.headers["x-request-id"]).toBe("target-2");
    expect(answer.headers.connection).toBe("close");
    expect(refusal(Buffer.from(answer.body))).toEqual(protocolRefusal("kms", TWO_HOSTS));
  });

  // Checked by the server's one request listener, before any surface routes the request: Node's own refusal
  // (requireHostHeader, now off) had an empty body, and /healthz and the other routes server.ts serves before REST
  // read the absolute-form's whole URL as their path.
  test("no Host header is 400 PROTOCOL_ERROR in JSON", async () => {
    const answer = await rawRequest(server.port, `GET /v1/keys/${keyId} HTTP/1.1\r\nx-request-id: target-3\r\n\r\n`);
    expect(answer.status).toBe(400);
    expect(refusal(Buffer.from(answer.body))).toEqual(protocolRefusal("kms", NO_HOST));
  });
  // RFC 9112 3.2: a Host header with an invalid value MUST be answered 400. The XML surface writes the value into its
  // hrefs; "evil.test/x?" there made links of every answer point elsewhere.
  test("a Host header that is not a host and optional port is 400 PROTOCOL_ERROR in JSON, and nothing is served", async () => {
    for (const host of ["a b", "evil.test/x?", 'x"y', "a:b:c", "user@a", "%zz", "h\u00e4st"]) {
      const answer = await rawRequest(server.port, `GET /v1/keys/${keyId} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${server.token}\r\nx-request-id: target-4\r\n\r\n`);
      expect(answer.status, host).toBe(400);
      expect(answer.headers["x-request-id"]).toBe("target-4");
      expect(answer.headers.connection).toBe("close");
      expect(refusal(Buffer.from(answer.body))).toEqual(protocolRefusal("kms", BAD_HOST));
    }
    // HTTP/1.0 needs no Host, but one it sends goes into hrefs all the same.
    const old = await rawRequest(server.port, `GET /v1/keys/${keyId} HTTP/1.0\r\nHost: a b\r\nAuthorization: Bearer ${server.token}\r\n\r\n`);
    expect(old.status).toBe(400);
    expect(refusal(Buffer.from(old.body))).toEqual(protocolRefusal("kms", BAD_HOST));
    for (const host of ["", "example.test", "example.test:8080", "127.0.0.1:1", "[::1]:443", "xn--hst-qla.test"]) {
      const answer = await rawRequest(server.port, `GET /v1/keys/${keyId} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n`);
      expect(answer.status, host).toBe(200);
    }
  });

  test("GET http://x/healthz is the health probe", async () => {
    const answer = await rawRequest(server.port, "GET http://x/healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    expect(answer.status).toBe(200);
    // Sent chunked, which rawRequest decodes: the body is the JSON alone.
    expect(answer.body).toContain('{"status":"ok"}');
  });
});

// The document's calls with "Payload sent: none" (disable, enable, restore), sent as it shows them: no body, no
// Content-Type. A page can make a browser send such a POST without a preflight, but a browser always sends Origin with
// a POST: refused then, as before (docs/access.md, "Browsers").
describe("a POST with no payload at all", () => {
  test("is served when no Origin is sent, and refused from a page, which changes nothing", async () => {
    const auth = { authorization: `Bearer ${server.token}` };
    const created = await request("POST", "/v1/keys", { ...auth, "content-type": "application/json" }, Buffer.from('{"parentId":"no-payload"}'));
    const keyId = (JSON.parse(created.body.toString()) as { id: string }).id;
    // Version 2, which is not the primary, so that it may be disabled.
    const added = await request("POST", `/v1/keys/${keyId}/versions`, { ...auth, "content-type": "application/json" }, Buffer.from("{}"));
    expect((JSON.parse(added.body.toString()) as { id: number }).id).toBe(2);
    const state = async (): Promise<string> => {
      const key = await request("GET", `/v1/keys/${keyId}/versions/2`, auth);
      return (JSON.parse(key.body.toString()) as { state: string }).state;
    };
    const fromPage = await request("POST", `/v1/keys/${keyId}/versions/2/disable`, { ...auth, origin: "https://page.example" });
    expect(fromPage.status).toBe(400);
    expect(refusal(fromPage.body)).toMatchObject({ reason: "UNSUPPORTED_CONTENT_TYPE", domain: "kms" });
    expect(await state()).toBe("ENABLED");
    const disabled = await request("POST", `/v1/keys/${keyId}/versions/2/disable`, auth);
    expect([disabled.status, (JSON.parse(disabled.body.toString()) as { state: string }).state]).toEqual([200, "DISABLED"]);
    const enabled = await request("POST", `/v1/keys/${keyId}/versions/2/enable`, auth);
    expect([enabled.status, await state()]).toEqual([200, "ENABLED"]);
    // A body or a content type other than JSON is still refused, Origin or not.
    const typed = await request("POST", `/v1/keys/${keyId}/versions/2/disable`, { ...auth, "content-type": "text/plain" });
    expect(refusal(typed.body)).toMatchObject({ reason: "UNSUPPORTED_CONTENT_TYPE" });
    expect(await state()).toBe("ENABLED");
  });
});

// A percent escape that cannot be decoded (a "%" not followed by two hex digits, or bytes that are not UTF-8): in a path
// variable it was REQUEST_INVALID in domain "cloudplane" naming no field, and in the query string read as U+FFFD, so
// `?parentId=demo%FF` listed another namespace (a probe, 2026-11-28).
describe("a malformed percent escape", () => {
  const MALFORMED = "a malformed percent-encoded sequence (a % not followed by two hex digits, or bytes that are not UTF-8)";
  const auth = (): http.OutgoingHttpHeaders => ({ authorization: `Bearer ${server.token}` });

  test("in a path variable is 400 REQUEST_INVALID naming the field, in the route's domain", async () => {
    for (const [path, field, domain] of [
      ["/v1/keys/%FF", "keyId", "kms"],
      ["/v1/keys/ok/versions/1%FF", "keyVersionId", "kms"],
      ["/v1/keys/%ZZ", "keyId", "kms"],
      ["/cluster/v1/si-1/node-pools/%E0%A4", "nodePoolId", "compute"],
    ] as const) {
      const answer = await request("GET", path, auth());
      expect([path, answer.status]).toEqual([path, 400]);
      expect(refusal(answer.body)).toEqual({
        code: 3,
        message: `${field}: invalid value in the URL path; ${MALFORMED}`,
        reason: "REQUEST_INVALID",
        domain,
        violations: [{ field, description: `invalid value in the URL path; ${MALFORMED}` }],
      });
    }
  });

  test("in a literal segment matches no route: 404 ROUTE_NOT_FOUND", async () => {
    const answer = await request("GET", "/v1/ke%ZZys/k1", auth());
    expect(answer.status).toBe(404);
    expect((JSON.parse(answer.body.toString()) as { code: number }).code).toBe(5);
  });

  test("in the query string is 400 REQUEST_INVALID naming the parameter, not read as U+FFFD", async () => {
    for (const [query, field] of [
      ["parentId=demo%FF", "parentId"],
      ["parentId=demo&page.limit=%ZZ", "page.limit"],
      ["%FF=1", ""],
    ] as const) {
      const answer = await request("GET", `/v1/keys?${query}`, auth());
      expect([query, answer.status]).toEqual([query, 400]);
      const description = `invalid value in the query string; ${MALFORMED}`;
      expect(refusal(answer.body)).toEqual({
        code: 3,
        message: field === "" ? description : `${field}: ${description}`,
        reason: "REQUEST_INVALID",
        domain: "kms",
        violations: [{ field, description }],
      });
    }
    // A well-formed escape and "+" are read as before.
    const ok = await request("GET", "/v1/keys?parentId=d%65mo", auth());
    expect(ok.status).toBe(200);
  });
});

// Node keeps the first Authorization of an HTTP/1.1 request and drops the others: a valid token then a bogus one was
// served, the other way round refused (a probe, 2026-11-28). Two of them name no one caller: refused either way.
describe("a credential header sent twice", () => {
  test("is 400 PROTOCOL_ERROR in the route's domain, whichever value comes first", async () => {
    const message = "the Authorization header must be sent once, not several times: the request must name one caller";
    for (const [first, second] of [
      [`Bearer ${server.token}`, "Bearer bogus"],
      ["Bearer bogus", `Bearer ${server.token}`],
    ]) {
      const answer = await rawRequest(server.port, `GET /v1/keys?parentId=twice HTTP/1.1\r\nHost: x\r\nAuthorization: ${first}\r\nauthorization: ${second}\r\nx-request-id: twice-1\r\n\r\n`);
      expect(answer.status).toBe(400);
      expect(answer.headers["x-request-id"]).toBe("twice-1");
      expect(answer.headers.connection).toBe("close");
      expect(refusal(Buffer.from(answer.body))).toEqual(protocolRefusal("kms", message));
    }
    const once = await rawRequest(server.port, `GET /v1/keys?parentId=twice HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n`);
    expect(once.status).toBe(200);
  });
});

// RFC 9112 6.1: a transfer coding the server does not understand SHOULD be answered 501. Node's parser frames the body
// by the final "chunked" and ignored the codings before it: `x-bogus, chunked` created the key (a probe, 2026-11-28).
describe("a transfer coding other than chunked", () => {
  const TE_MESSAGE =
    "the only transfer coding this server takes is chunked, once (RFC 9112, section 6.1): send the body with Content-Length or Transfer-Encoding: chunked, and a compressed body with Content-Encoding";
  const chunked = (body: string): string => `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;

  test("is 501 PROTOCOL_ERROR in JSON, in the route's domain, the connection closed, and nothing is created", async () => {
    for (const codings of ["x-bogus, chunked", "gzip, chunked", "identity, chunked"]) {
      const body = chunked('{"parentId":"transfer-codings"}');
      const answer = await rawRequest(
        server.port,
        `POST /v1/keys HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ${codings}\r\nContent-Type: application/json\r\nAuthorization: Bearer ${server.token}\r\nx-request-id: te-1\r\n\r\n${body}`,
      );
      expect([codings, answer.status]).toEqual([codings, 501]);
      expect(answer.headers["content-type"]).toBe("application/json");
      expect(answer.headers["x-request-id"]).toBe("te-1");
      expect(answer.headers.connection).toBe("close");
      const json = JSON.parse(answer.body) as { code: number; message: string; details: { typeUrl: string; value: string }[] };
      expect([json.code, json.message]).toEqual([12, TE_MESSAGE]);
      expect(fromBinary(ErrorInfoSchema, base64Decode(json.details[0]!.value))).toMatchObject({ reason: "PROTOCOL_ERROR", domain: "kms" });
    }
    const listed = await request("GET", "/v1/keys?parentId=transfer-codings", { authorization: `Bearer ${server.token}` });
    expect(JSON.parse(listed.body.toString())).toEqual({});
  });

  test("chunked alone, in any case, is served; empty list elements are not codings", async () => {
    const spaced = await rawRequest(
      server.port,
      `POST /v1/keys HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: , chunked\r\nContent-Type: application/json\r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n${chunked('{"parentId":"transfer-codings-spaced"}')}`,
    );
    expect(spaced.status).toBe(200);
    const answer = await rawRequest(
      server.port,
      `POST /v1/keys HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\nContent-Type: application/json\r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n${chunked('{"parentId":"transfer-codings-ok"}')}`,
    );
    expect(answer.status).toBe(200);
    const { id } = JSON.parse(answer.body) as { id: string };
    const listed = await request("GET", "/v1/keys?parentId=transfer-codings-ok", { authorization: `Bearer ${server.token}` });
    expect((JSON.parse(listed.body.toString()) as { keys: { id: string }[] }).keys.map((k) => k.id)).toEqual([id]);
  });
});

// refuseRequestTarget as server.ts is to call it, first in its request listener, on a server that leaves the Host
// check to it (requireHostHeader: false).
describe("refuseRequestTarget in front of every route", () => {
  let plain: http.Server;
  let port: number;
  beforeAll(async () => {
    const routes = new RouteTable(methodTableOf([KeyManagerService]));
    plain = http.createServer({ requireHostHeader: false }, (req, res) => {
      if (refuseRequestTarget(req, res, routes)) return;
      const body = JSON.stringify({ url: req.url, host: req.headers.host });
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
      res.end(body);
    });
    await new Promise<void>((resolve) => plain.listen(0, "127.0.0.1", resolve));
    port = (plain.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => plain.close(resolve));
  });

  test("no Host header: 400 PROTOCOL_ERROR in JSON, the route's domain, the connection closed", async () => {
    const answer = await rawRequest(port, "GET /v1/keys/k HTTP/1.1\r\nx-request-id: target-4\r\n\r\n");
    expect(answer.status).toBe(400);
    expect(answer.headers["content-type"]).toBe("application/json");
    expect(answer.headers["x-request-id"]).toBe("target-4");
    expect(answer.headers.connection).toBe("close");
    expect(refusal(Buffer.from(answer.body))).toEqual(protocolRefusal("kms", NO_HOST));
    const health = await rawRequest(port, "GET /healthz HTTP/1.1\r\n\r\n");
    expect(refusal(Buffer.from(health.body))).toEqual(protocolRefusal("cloudplane", NO_HOST));
  });

  test("an HTTP/1.0 request needs no Host", async () => {
    const answer = await rawRequest(port, "GET /healthz HTTP/1.0\r\n\r\n");
    expect(answer.status).toBe(200);
  });

  test("the absolute-form is rewritten to its path, with the target's authority as Host", async () => {
    const answer = await rawRequest(port, "GET http://example.test:8080?a=1 HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n");
    expect(JSON.parse(answer.body)).toEqual({ url: "/?a=1", host: "example.test:8080" });
    const health = await rawRequest(port, "GET http://x/healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    expect(JSON.parse(health.body)).toEqual({ url: "/healthz", host: "x" });
  });
});
