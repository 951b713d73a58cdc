import { execFileSync } from "node:child_process";
import http2 from "node:http2";
import https from "node:https";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { adminAuth, adminCredentials } from "../support/credentials.js";
import { adminAuthInterceptor } from "../support/kms-clients.js";
import { spawnServer, startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { ACCEPT, INSTANTIATE_TYPE, MOSCOW, UBUNTU, instantiateParams, templateHref } from "./vcd-helpers.js";

describe("cleartext port", () => {
  let server: TestServer;
  beforeAll(async () => {
    // No origin is allowed by default (CORS_ALLOWED_ORIGINS): the browser console's must be listed.
    server = await startServer({ env: { CORS_ALLOWED_ORIGINS: "https://app.example" } });
  });
  afterAll(() => server.stop());

  it("answers probes on HTTP/1.1 and h2c", async () => {
    const res = await fetch(`${server.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    const session = http2.connect(server.url);
    const body = await new Promise<string>((resolve, reject) => {
      const req = session.request({ ":path": "/readyz" });
      let text = "";
      req.on("data", (c: Buffer) => (text += c.toString()));
      req.on("end", () => resolve(text));
      req.on("error", reject);
    });
    session.close();
    expect(JSON.parse(body)).toEqual({ status: "ok" });
  });

  it("puts a request id on the probes' and the static files' answers too", async () => {
    for (const path of ["/healthz", "/readyz", "/openapi.json", "/metrics"]) {
      const own = await fetch(`${server.url}${path}`, { headers: { "x-request-id": "probe-1" } });
      expect(own.headers.get("x-request-id"), path).toBe("probe-1");
      const made = await fetch(`${server.url}${path}`);
      expect(made.headers.get("x-request-id"), path).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  it("answers a CORS preflight for browser clients and exposes the gRPC-web and rate-limit headers", async () => {
    const res = await fetch(`${server.url}/kms.v1.KeyManagerService/Encrypt`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "POST", "access-control-request-headers": "content-type,x-grpc-web" },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(res.headers.get("vary")).toBe("Origin");
    expect(res.headers.get("access-control-allow-methods")).toContain("PATCH");
    expect(res.headers.get("access-control-allow-headers")).toContain("X-Grpc-Web");
    expect(res.headers.get("access-control-allow-headers")).toContain("Authorization");
    expect(res.headers.get("access-control-expose-headers")).toContain("Grpc-Status-Details-Bin");
    const actual = await fetch(`${server.url}/v1/keys?parentId=cors`, { headers: { origin: "https://app.example", ...adminAuth(server.url) } });
    expect(actual.status).toBe(200);
    expect(actual.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(actual.headers.get("access-control-expose-headers")).toContain("X-Request-Id");
    // A page of any other site gets no CORS header, so its browser keeps the answer from it.
    const other = await fetch(`${server.url}/kms.v1.KeyManagerService/Encrypt`, {
      method: "OPTIONS",
      headers: { origin: "https://elsewhere.example", "access-control-request-method": "POST" },
    });
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    expect(other.headers.get("access-control-allow-headers")).toBeNull();
  });

  // A page of an allowed origin must read the session token, the whole point of POST /api/sessions, the Location of
  // a new vApp, and the Allow and WWW-Authenticate that say what to do after a 405 or a 401; none was exposed.
  it("exposes the virtualization API's token, Location, Allow and WWW-Authenticate to an allowed origin", async () => {
    const exposed =
      "Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin, Content-Encoding, Connect-Content-Encoding, X-Request-Id, Retry-After, " +
      "X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, X-VMWARE-VCLOUD-ACCESS-TOKEN, X-VMWARE-VCLOUD-TOKEN-TYPE, Location, Allow, WWW-Authenticate";
    const origin = "https://app.example";
    const admin = adminCredentials(server.dataDir);
    const basic = `Basic ${Buffer.from(`${admin.client_id}:${admin.client_secret}`).toString("base64")}`;
    const session = await fetch(`${server.url}/api/sessions`, { method: "POST", headers: { origin, authorization: basic, accept: ACCEPT } });
    expect(session.status).toBe(200);
    expect(session.headers.get("access-control-allow-origin")).toBe(origin);
    expect(session.headers.get("access-control-expose-headers")).toBe(exposed);
    const token = session.headers.get("x-vmware-vcloud-access-token")!;
    const body = instantiateParams({ name: "cors-vapp", source: templateHref(server.url, UBUNTU) });
    const created = await fetch(`${server.url}/api/vdc/${MOSCOW}/action/instantiateVAppTemplate`, {
      method: "POST",
      headers: { origin, authorization: `Bearer ${token}`, accept: ACCEPT, "content-type": INSTANTIATE_TYPE },
      body,
    });
    expect(created.status).toBe(201);
    expect(created.headers.get("location")).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/api\/vApp\/vapp-/);
    expect(created.headers.get("access-control-expose-headers")).toBe(exposed);
    const notAllowed = await fetch(`${server.url}/api/sessions`, { headers: { origin, accept: ACCEPT } });
    expect(notAllowed.status).toBe(405);
    expect(notAllowed.headers.get("allow")).toBe("POST");
    expect(notAllowed.headers.get("access-control-expose-headers")).toBe(exposed);
    const unauthenticated = await fetch(`${server.url}/api/sessions`, { method: "POST", headers: { origin, accept: ACCEPT } });
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.headers.get("www-authenticate")).toBe('Basic realm="cloudplane"');
    expect(unauthenticated.headers.get("access-control-expose-headers")).toBe(exposed);
  });

  it("takes a 64 KiB request over h2c in one go and echoes the request id", async () => {
    const client = createClient(KeyManagerService, createGrpcTransport({ baseUrl: server.url, interceptors: [adminAuthInterceptor(server.url)] }));
    const key = await client.createCryptoKey({ parentId: "big" });
    const plaintext = Buffer.alloc(64 * 1024, 1);
    let requestId = "";
    const enc = await client.encrypt(
      { keyId: key.id, keyVersionId: 1, plaintext },
      { headers: { "x-request-id": "caller-id-1" }, onHeader: (h) => (requestId = h.get("x-request-id") ?? "") },
    );
    expect(requestId).toBe("caller-id-1");
    const dec = await client.decrypt({ keyId: key.id, ciphertext: enc.ciphertext });
    expect(Buffer.from(dec.plaintext).equals(plaintext)).toBe(true);
  });
});

describe("TLS", () => {
  const dir = tempDir();
  let server: TestServer;
  beforeAll(async () => {
    const cert = join(dir.path, "cert.pem");
    const key = join(dir.path, "key.pem");
    execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"], { stdio: "ignore" });
    server = await startServer({ env: { TLS_CERT_FILE: cert, TLS_KEY_FILE: key } });
  });
  afterAll(async () => {
    await server.stop();
    dir.remove();
  });

  it("negotiates h2 by ALPN and still serves HTTP/1.1 clients", async () => {
    const session = http2.connect(`https://127.0.0.1:${server.port}`, { rejectUnauthorized: false });
    const status = await new Promise<number>((resolve, reject) => {
      const req = session.request({ ":path": "/healthz" });
      req.on("response", (h) => resolve(Number(h[":status"])));
      req.on("error", reject);
      req.end();
    });
    expect(session.alpnProtocol).toBe("h2");
    session.close();
    expect(status).toBe(200);
    const h1 = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      https
        .get({ host: "127.0.0.1", port: server.port, path: "/v1/keys?parentId=tls", headers: adminAuth(server.url), rejectUnauthorized: false }, (res) => {
          let body = "";
          res.on("data", (c: Buffer) => (body += c.toString()));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        })
        .on("error", reject);
    });
    expect(h1).toEqual({ status: 200, body: "{}" });
  });
});

describe("graceful shutdown", () => {
  it("stops on SIGTERM with exit code 0 after closing the store", async () => {
    const dir = tempDir();
    const server = await spawnServer({ dataDir: dir.path });
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    const code = await server.kill("SIGTERM");
    expect(code).toBe(0);
    expect(server.logs()).toContain('"msg":"stopped"');
    dir.remove();
  });

  it("ends open health watches and refuses new connections once closed", async () => {
    const server = await startServer();
    const session = http2.connect(server.url);
    const watch = session.request({
      ":method": "POST",
      ":path": "/grpc.health.v1.Health/Watch",
      "content-type": "application/grpc",
      te: "trailers",
    });
    watch.end(Buffer.from([0, 0, 0, 0, 0]));
    const ended = new Promise<void>((resolve) => {
      watch.on("close", () => resolve());
      watch.resume();
    });
    await new Promise((r) => setTimeout(r, 100));
    const started = Date.now();
    await server.stop();
    await ended;
    expect(Date.now() - started).toBeLessThan(2000);
    await expect(fetch(`${server.url}/healthz`)).rejects.toThrow();
    session.destroy();
  });
});
