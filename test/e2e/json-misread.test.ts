import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminAuth } from "../support/credentials.js";
import { frame, rawCall } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// An integer written as a JSON string of another form than decimal digits ("0x1", "1e0", "1.0"): protobuf-es read it
// as Number() does, so an Encrypt naming version "0x1" encrypted with version 1, on REST and Connect's JSON alike,
// while the REST path refused /versions/0x1 (two probes, 2026-11-27). Refused now on every JSON surface, naming the
// field, as any value that does not fit it.

let server: TestServer;
let keyId = "";

beforeAll(async () => {
  server = await startServer();
  const res = await fetch(`${server.url}/v1/keys`, { method: "POST", headers: { ...adminAuth(server.url), "content-type": "application/json" }, body: JSON.stringify({ parentId: "misread" }) });
  keyId = ((await res.json()) as { id: string }).id;
});
afterAll(() => server.stop());

const message = "keyVersionId: invalid value; expected a 32-bit integer (number or decimal string)";

describe("an integer as a string that is not decimal digits", () => {
  it("is INVALID_ARGUMENT naming the field on REST, Connect JSON and gRPC with +json", async () => {
    for (const version of ["0x1", "0b1", "0o1", "1e0", "1.0"]) {
      const body = JSON.stringify({ keyId, keyVersionId: version, plaintext: "aGk=" });
      const rest = await fetch(`${server.url}/v1/encrypt`, { method: "POST", headers: { ...adminAuth(server.url), "content-type": "application/json" }, body });
      expect([version, rest.status, ((await rest.json()) as { message: string }).message]).toEqual([version, 400, message]);
      const connect = await fetch(`${server.url}/kms.v1.KeyManagerService/Encrypt`, {
        method: "POST",
        headers: { ...adminAuth(server.url), "content-type": "application/json", "connect-protocol-version": "1" },
        body,
      });
      expect([version, connect.status, await connect.json()]).toEqual([version, 400, expect.objectContaining({ code: "invalid_argument", message })]);
      const grpc = await rawCall(server.url, "/kms.v1.KeyManagerService/Encrypt", frame(Buffer.from(body)), { "content-type": "application/grpc+json", ...adminAuth(server.url) });
      expect([version, grpc.trailers["grpc-status"], decodeURIComponent(String(grpc.trailers["grpc-message"]))]).toEqual([version, "3", message]);
    }
  });

  it("a decimal string and a number are still taken", async () => {
    for (const version of ["1", 1]) {
      const res = await fetch(`${server.url}/v1/encrypt`, {
        method: "POST",
        headers: { ...adminAuth(server.url), "content-type": "application/json" },
        body: JSON.stringify({ keyId, keyVersionId: version, plaintext: "aGk=" }),
      });
      expect(res.status).toBe(200);
    }
  });
});
