import http2 from "node:http2";
import { fromBinary } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { afterAll, beforeAll, expect, test } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { frame } from "../support/raw-grpc.js";
import { rawRequest } from "../support/raw-http1.js";
import { http2Request, http2RequestOn } from "../support/raw-http2.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// HTTP/2's header limits, made HTTP/1.1's and announced (docs/robustness.md, "Header limits"): a probe found a 20 KB
// header served over h2 but refused 431 over HTTP/1.1, 200 header fields reset with ENHANCE_YOUR_CALM, and SETTINGS
// announcing no limit (4294967295).

let server: TestServer;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server.stop();
});

const h2 = (headers: http2.OutgoingHttpHeaders, body?: Buffer) => http2Request(server.url, headers, body);

function refusal(body: string): unknown {
  const json = JSON.parse(body) as { code: number; message: string; details: { typeUrl: string; value: string }[] };
  const info = fromBinary(ErrorInfoSchema, base64Decode(json.details[0]!.value));
  return { code: json.code, message: json.message, reason: info.reason, domain: info.domain, details: json.details.map((d) => d.typeUrl) };
}

const tooLarge = (domain: string): unknown => ({
  code: 8,
  message: "the request line and headers are larger than 16384 bytes",
  reason: "REQUEST_HEAD_TOO_LARGE",
  domain,
  details: ["type.googleapis.com/google.rpc.ErrorInfo", "type.googleapis.com/google.rpc.QuotaFailure"],
});

test("the SETTINGS announce the header list size nghttp2 enforces before they are acknowledged", async () => {
  const session = http2.connect(server.url);
  const settings = await new Promise<http2.Settings>((resolve) => session.once("remoteSettings", resolve));
  session.close();
  expect(settings.maxHeaderListSize).toBe(65535);
});

// Announcing 16384 made nghttp2 reset every stream after the first whose head was over it (ENHANCE_YOUR_CALM), once
// the client had acknowledged the SETTINGS; only the first got the 431.
test("a 17 KB head gets the same 431 on every stream of a session, before and after the SETTINGS are acknowledged", async () => {
  const session = http2.connect(server.url);
  try {
    const headers = { ":method": "GET", ":path": "/v1/keys/k", "x-padding": "p".repeat(17_000) };
    const answers = [await http2RequestOn(session, headers)];
    await new Promise<void>((resolve) => (session.pendingSettingsAck ? session.once("localSettings", () => resolve()) : resolve()));
    await new Promise((resolve) => session.ping(resolve));
    for (let i = 0; i < 3; i++) answers.push(await http2RequestOn(session, headers));
    for (const answer of answers) {
      expect(answer.rstCode).toBe(0);
      expect(answer.status).toBe(431);
      expect(refusal(answer.body)).toEqual(tooLarge("kms"));
    }
  } finally {
    session.close();
  }
});

test("a 20 KB header is refused 431 REQUEST_HEAD_TOO_LARGE over HTTP/2 as over HTTP/1.1, in the route's domain", async () => {
  const padding = "p".repeat(20_000);
  const one = await rawRequest(server.port, `GET /v1/keys/k HTTP/1.1\r\nHost: a\r\nx-padding: ${padding}\r\n\r\n`);
  expect(one.status).toBe(431);
  expect(refusal(one.body)).toEqual(tooLarge("kms"));
  const two = await h2({ ":method": "GET", ":path": "/v1/keys/k", "x-padding": padding, "x-request-id": "head-1" });
  expect(two.status).toBe(431);
  expect(two.headers["content-type"]).toBe("application/json");
  expect(two.headers["x-request-id"]).toBe("head-1");
  expect(refusal(two.body)).toEqual(tooLarge("kms"));
  // gRPC too, on the direct path's method: before it is a call, as over HTTP/1.1.
  const grpc = await h2({ ":method": "POST", ":path": "/kms.v1.KeyManagerService/ListCryptoKeys", "content-type": "application/grpc", te: "trailers", "x-padding": padding }, frame(new Uint8Array(0)));
  expect(grpc.status).toBe(431);
  expect(refusal(grpc.body)).toEqual(tooLarge("kms"));
});

test("a head just within the limit, and 200 header fields, are served over both", async () => {
  const within = { "x-padding": "p".repeat(15_000) };
  const many = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`x-field-${i}`, "v"]));
  for (const extra of [within, many]) {
    const lines = Object.entries(extra).map(([name, value]) => `${name}: ${value}\r\n`).join("");
    const one = await rawRequest(server.port, `GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n${lines}\r\n`);
    expect(one.status).toBe(200);
    const two = await h2({ ":method": "GET", ":path": "/healthz", ...extra });
    expect(two.rstCode).toBe(0);
    expect(two.status).toBe(200);
  }
});
