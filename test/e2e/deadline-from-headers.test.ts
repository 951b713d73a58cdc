import http from "node:http";
import http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CreateCryptoKeyRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import { adminAuth } from "../support/credentials.js";
import { frame } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { storeRows } from "../support/store-rows.js";
import { ACCEPT, INSTANTIATE_TYPE, MOSCOW, UBUNTU, instantiateParams, templateHref } from "./vcd-helpers.js";

// A caller's deadline counts from the request's headers, as gRPC defines grpc-timeout and as Connect counts it, not
// from the end of its body: a CreateCryptoKey whose body comes after its deadline has passed is DEADLINE_EXCEEDED
// and creates nothing, on both call paths. The direct gRPC path counted from the body's end and ran the handler
// (a probe, 2026-11-27); so did REST and the XML surface, for a caller that sends a timeout header (a REST caller
// may send either protocol's, docs/pipeline.md).

const PATH = "/kms.v1.KeyManagerService/CreateCryptoKey";

// Sends the headers, then the body `delayMs` later; resolves with the status.
function lateBody(url: string, delayMs: number, parentId: string): Promise<{ status: string | undefined; message: string | undefined }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    const req = session.request({ ":method": "POST", ":path": PATH, "content-type": "application/grpc", te: "trailers", "grpc-timeout": "300m", ...adminAuth(url) });
    let status: string | undefined;
    let message: string | undefined;
    const read = (h: http2.IncomingHttpHeaders): void => {
      if (h["grpc-status"] !== undefined) {
        status = String(h["grpc-status"]);
        message = decodeURIComponent(String(h["grpc-message"] ?? ""));
      }
    };
    req.on("response", read);
    req.on("trailers", read);
    req.on("data", () => {});
    req.on("close", () => {
      session.close();
      resolve({ status, message });
    });
    req.on("error", reject);
    setTimeout(() => req.end(frame(toBinary(CreateCryptoKeyRequestSchema, create(CreateCryptoKeyRequestSchema, { parentId })))), delayMs);
  });
}

describe.each(["direct", "connect"])("a body that arrives after the caller's deadline, on the %s call path", (callPath) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startServer({ env: { CALL_PATH: callPath } });
  });
  afterAll(() => server.stop());

  it("is DEADLINE_EXCEEDED and creates no key", async () => {
    const parentId = `late-${callPath}`;
    const answer = await lateBody(server.url, 600, parentId);
    expect(answer).toEqual({ status: "4", message: "the call did not finish within its deadline" });
    expect(await storeRows(server, "SELECT id FROM kms_keys WHERE parent_id = ?", [parentId])).toEqual([]);
  });

  it("within the deadline, is served", async () => {
    const answer = await lateBody(server.url, 0, `early-${callPath}`);
    expect(answer.status).toBe("0");
  });
});

// An HTTP/1.1 request whose headers go at once and whose body follows `delayMs` later; resolves with the answer.
function lateHttp1Body(url: string, path: string, headers: Record<string, string>, body: string, delayMs: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}${path}`, { method: "POST", headers: { ...headers, "content-length": String(Buffer.byteLength(body)) } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on("error", reject);
    req.flushHeaders();
    setTimeout(() => req.end(body), delayMs);
  });
}

describe.each(["direct", "connect"])("a REST body that arrives after the caller's deadline, on the %s call path", (callPath) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startServer({ env: { CALL_PATH: callPath } });
  });
  afterAll(() => server.stop());

  const create = (parentId: string, delayMs: number) =>
    lateHttp1Body(server.url, "/v1/keys", { "content-type": "application/json", "connect-timeout-ms": "300", ...adminAuth(server.url) }, JSON.stringify({ parentId }), delayMs);

  it("is 504 DEADLINE_EXCEEDED and creates no key", async () => {
    const parentId = `late-rest-${callPath}`;
    const answer = await create(parentId, 600);
    expect(answer.status).toBe(504);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 4, message: "the call did not finish within its deadline" });
    expect(await storeRows(server, "SELECT id FROM kms_keys WHERE parent_id = ?", [parentId])).toEqual([]);
  });

  it("within the deadline, is served", async () => {
    expect((await create(`early-rest-${callPath}`, 0)).status).toBe(200);
  });
});

describe("a VCD instantiation whose body arrives after the caller's deadline", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(() => server.stop());

  const instantiate = (name: string, delayMs: number) =>
    lateHttp1Body(
      server.url,
      `/api/vdc/${MOSCOW}/action/instantiateVAppTemplate`,
      { "content-type": INSTANTIATE_TYPE, accept: ACCEPT, authorization: `Bearer ${server.token}`, "grpc-timeout": "300m" },
      instantiateParams({ name, source: templateHref(server.url, UBUNTU) }),
      delayMs,
    );

  it("is 504 and creates no vApp", async () => {
    const answer = await instantiate("late-vapp", 600);
    expect(answer.status).toBe(504);
    expect(answer.body).toContain("the call did not finish within its deadline");
    expect(await storeRows(server, "SELECT id FROM vapps WHERE name = ?", ["late-vapp"])).toEqual([]);
  });

  it("within the deadline, is served", async () => {
    expect((await instantiate("early-vapp", 0)).status).toBe(201);
  });
});
