import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminAuth } from "../support/credentials.js";
import { frame, rawCall } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { frames, trailerFrame } from "../support/wire-call.js";

// Connect's JSON forms (Connect unary JSON, gRPC and gRPC-web with +json) took a member the request type does not
// have, and an enum name it does not know, without a word, where REST refuses both (a probe, 2026-11-27): under
// updateMask "description", {"key":{"id":K,"descripton":"new"}} cleared the key's description, and a
// defaultAlgorithm of "AES_192_GCM" became AES_256. Now INVALID_ARGUMENT, an unknown member named as REST names it;
// and nothing is changed.

let server: TestServer;
let keyId = "";

async function connect(method: string, body: object): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${server.url}/kms.v1.KeyManagerService/${method}`, {
    method: "POST",
    headers: { ...adminAuth(server.url), "content-type": "application/json", "connect-protocol-version": "1" },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

async function description(): Promise<unknown> {
  return (await connect("GetCryptoKey", { keyId })).json.description;
}

beforeAll(async () => {
  server = await startServer();
  const created = await connect("CreateCryptoKey", { parentId: "unknown-members", description: "kept", defaultAlgorithm: "AES_128" });
  expect(created.status).toBe(200);
  keyId = created.json.id as string;
});
afterAll(() => server.stop());

const unknownMessage = 'key.descripton: unknown field "descripton" in kms.v1.CryptoKey';
const typo = () => ({ key: { id: keyId, descripton: "new" }, updateMask: "description" });

describe("a member the request type does not have", () => {
  it("Connect JSON: invalid_argument UNKNOWN_FIELD naming it, as REST; the description is kept", async () => {
    const res = await connect("UpdateCryptoKey", typo());
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ code: "invalid_argument", message: unknownMessage });
    const details = res.json.details as { type: string; debug: unknown }[];
    expect(details.map((d) => [d.type, d.debug])).toEqual([
      ["google.rpc.ErrorInfo", { reason: "UNKNOWN_FIELD", domain: "kms" }],
      ["google.rpc.BadRequest", { fieldViolations: [{ field: "key.descripton", description: 'unknown field "descripton" in kms.v1.CryptoKey' }] }],
    ]);
    const rest = await fetch(`${server.url}/v1/keys/${keyId}`, {
      method: "PATCH",
      headers: { ...adminAuth(server.url), "content-type": "application/json" },
      body: JSON.stringify(typo()),
    });
    expect([rest.status, ((await rest.json()) as { message: string }).message]).toEqual([400, unknownMessage]);
    expect(await description()).toBe("kept");
  });

  it("gRPC and gRPC-web with +json: INVALID_ARGUMENT naming it", async () => {
    const body = frame(Buffer.from(JSON.stringify(typo())));
    const grpc = await rawCall(server.url, "/kms.v1.KeyManagerService/UpdateCryptoKey", body, { "content-type": "application/grpc+json", ...adminAuth(server.url) });
    expect([grpc.trailers["grpc-status"], decodeURIComponent(String(grpc.trailers["grpc-message"]))]).toEqual(["3", unknownMessage]);
    const web = await fetch(`${server.url}/kms.v1.KeyManagerService/UpdateCryptoKey`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+json", "x-grpc-web": "1", ...adminAuth(server.url) },
      body: new Uint8Array(body),
    });
    const trailer = trailerFrame((frames(Buffer.from(await web.arrayBuffer())).at(-1) ?? [0, Buffer.alloc(0)])[1]);
    expect([trailer["grpc-status"], decodeURIComponent(trailer["grpc-message"] ?? "")]).toEqual(["3", unknownMessage]);
    expect(await description()).toBe("kept");
  });
});

describe("an enum name the type does not have", () => {
  it("Connect JSON: invalid_argument; neither the key's default nor a new version's algorithm becomes AES_256", async () => {
    const update = await connect("UpdateCryptoKey", { key: { id: keyId, defaultAlgorithm: "AES_192_GCM" }, updateMask: "defaultAlgorithm" });
    expect([update.status, update.json.code]).toEqual([400, "invalid_argument"]);
    const version = await connect("CreateCryptoKeyVersion", { keyId, algorithm: "AES128" });
    expect([version.status, version.json.code]).toEqual([400, "invalid_argument"]);
    const key = (await connect("GetCryptoKey", { keyId })).json;
    expect(key.defaultAlgorithm).toBe("AES_128");
    const versions = (await connect("ListCryptoKeyVersions", { keyId })).json.versions as unknown[];
    expect(versions).toHaveLength(1);
  });
});
