import { execFileSync } from "node:child_process";
import http from "node:http";
import http2 from "node:http2";
import https from "node:https";
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ListCryptoKeysRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import { frame } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { ACCEPT } from "./vcd-helpers.js";

// An Expect header other than 100-continue (docs/callers.md, "Expect"): Node answered it with a bare 417 (no body, no
// request id, no CORS headers) on every surface and on gRPC's +json form, while gRPC's +proto form, which the direct
// adapter reads before Node's compatibility layer, was served. Now every surface serves such a request as if it had
// no Expect, over HTTP/1.1 and HTTP/2, cleartext and TLS.

const ORIGIN = "https://app.example";
const dir = tempDir();
const servers: Record<"cleartext" | "TLS", TestServer> = {} as Record<"cleartext" | "TLS", TestServer>;

beforeAll(async () => {
  const cert = join(dir.path, "cert.pem");
  const key = join(dir.path, "key.pem");
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"], { stdio: "ignore" });
  servers.cleartext = await startServer({ env: { CORS_ALLOWED_ORIGINS: ORIGIN } });
  servers.TLS = await startServer({ env: { CORS_ALLOWED_ORIGINS: ORIGIN, TLS_CERT_FILE: cert, TLS_KEY_FILE: key } });
});

afterAll(async () => {
  await servers.cleartext.stop();
  await servers.TLS.stop();
  dir.remove();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  trailers: http.IncomingHttpHeaders;
  body: string;
  // Whether a 100 Continue came first.
  continued: boolean;
}

interface Request {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

function http1(server: TestServer, r: Request): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const client = server.url.startsWith("https:") ? https : http;
    let continued = false;
    const req = client.request(`${server.url}${r.path}`, { method: r.method, headers: r.headers, agent: false, rejectUnauthorized: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, trailers: res.trailers, body: Buffer.concat(chunks).toString(), continued }));
      res.on("error", reject);
    });
    req.on("continue", () => (continued = true));
    req.on("error", reject);
    req.end(r.body);
  });
}

function h2(server: TestServer, r: Request): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(server.url, { rejectUnauthorized: false });
    session.on("error", reject);
    const req = session.request({ ":method": r.method, ":path": r.path, ...r.headers });
    let headers: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    let continued = false;
    const chunks: Buffer[] = [];
    req.on("continue", () => (continued = true));
    req.on("response", (h) => (headers = h));
    req.on("trailers", (t) => (trailers = t));
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      session.close();
      resolve({ status: Number(headers[":status"]), headers, trailers, body: Buffer.concat(chunks).toString(), continued });
    });
    req.on("error", reject);
    req.end(r.body);
  });
}

const LIST_KEYS = "/kms.v1.KeyManagerService/ListCryptoKeys";

// One request of each surface, and what it answers when served.
function requests(server: TestServer): { name: string; request: Request; served(answer: Answer): void }[] {
  const auth = { authorization: `Bearer ${server.token}` };
  const json = (body: string) => (answer: Answer): void => {
    expect(answer.status).toBe(200);
    expect(answer.body).toBe(body);
  };
  return [
    { name: "health probe", request: { method: "GET", path: "/healthz", headers: {} }, served: json('{"status":"ok"}') },
    { name: "REST", request: { method: "GET", path: "/v1/keys?parentId=expect", headers: auth }, served: json("{}") },
    {
      name: "virtualization API",
      request: { method: "GET", path: "/api/query?type=vAppTemplate&pageSize=1", headers: { ...auth, accept: ACCEPT } },
      served: (answer) => {
        expect(answer.status).toBe(200);
        expect(answer.body).toContain("<QueryResultRecords");
      },
    },
    {
      name: "Connect",
      request: { method: "POST", path: LIST_KEYS, headers: { ...auth, "content-type": "application/json", "connect-protocol-version": "1" }, body: Buffer.from('{"parentId":"expect"}') },
      served: json("{}"),
    },
    {
      name: "gRPC-web",
      request: { method: "POST", path: LIST_KEYS, headers: { ...auth, "content-type": "application/grpc-web+proto" }, body: frame(toBinary(ListCryptoKeysRequestSchema, create(ListCryptoKeysRequestSchema, { parentId: "expect" }))) },
      served: (answer) => {
        expect(answer.status).toBe(200);
        expect(answer.body).toMatch(/grpc-status: ?0\r\n/);
      },
    },
  ];
}

// gRPC is HTTP/2 only: +proto is served by the direct adapter, +json by connect-node through Node's compatibility layer.
function grpcRequests(server: TestServer): { name: string; request: Request }[] {
  const headers = (type: string): Record<string, string> => ({ authorization: `Bearer ${server.token}`, "content-type": type, te: "trailers" });
  return [
    { name: "gRPC +proto", request: { method: "POST", path: LIST_KEYS, headers: headers("application/grpc+proto"), body: frame(toBinary(ListCryptoKeysRequestSchema, create(ListCryptoKeysRequestSchema, { parentId: "expect" }))) } },
    { name: "gRPC +json", request: { method: "POST", path: LIST_KEYS, headers: headers("application/grpc+json"), body: frame(Buffer.from('{"parentId":"expect"}')) } },
  ];
}

describe.each(["cleartext", "TLS"] as const)("an unknown expectation, %s", (kind) => {
  test.each([
    ["HTTP/1.1", http1],
    ["HTTP/2", h2],
  ] as const)("every surface over %s serves the request as if it had no Expect, with its request id and CORS headers", async (_name, send) => {
    const server = servers[kind];
    for (const { name, request, served } of requests(server)) {
      const answer = await send(server, { ...request, headers: { ...request.headers, expect: "bake-a-cake", origin: ORIGIN, "x-request-id": "expect-1" } });
      served(answer);
      expect(answer.headers["x-request-id"], name).toBe("expect-1");
      expect(answer.headers["access-control-allow-origin"], name).toBe(ORIGIN);
      expect(answer.continued, name).toBe(false);
    }
  });

  test("both gRPC call paths serve it", async () => {
    const server = servers[kind];
    for (const { name, request } of grpcRequests(server)) {
      const answer = await h2(server, { ...request, headers: { ...request.headers, expect: "bake-a-cake" } });
      expect(answer.status, name).toBe(200);
      expect(answer.trailers["grpc-status"], name).toBe("0");
    }
  });

  // Node's HTTP/2 layer takes only the exact value `100-continue`; HTTP/1.1 takes it in any case.
  test("100-continue in another case gets its 100 Continue over HTTP/2, as over HTTP/1.1", async () => {
    const server = servers[kind];
    const request = { method: "GET", path: "/healthz", headers: { expect: "100-Continue" } };
    for (const send of [http1, h2]) {
      const answer = await send(server, request);
      expect(answer.status).toBe(200);
      expect(answer.continued).toBe(true);
    }
  });
});
