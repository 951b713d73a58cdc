import { fromBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { adminAuth } from "../support/credentials.js";
import { frame, rawCall } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// An integer written as a JSON string of another form than decimal digits ("0x1", "1e0", "1.0"): protobuf-es read it
// as Number() does, so an Encrypt naming version "0x1" encrypted with version 1, on REST and Connect's JSON alike,
// while the REST path refused /versions/0x1 (two probes, 2026-11-27). Refused now on every JSON surface, naming the
// field, as any value that does not fit it. The same for bytes that are not base64 in one of its two forms, which
// protobuf-es read leniently: an AAD of "a===" was none at all (a probe, 2026-11-28).

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

describe("bytes that are not base64 in one of its two forms", () => {
  const bytesMessage = (field: string) =>
    `${field}: invalid value; expected base64-encoded bytes (the standard or the URL-safe alphabet, not both; padding only at the end, or none)`;

  it("are INVALID_ARGUMENT naming the field on REST, Connect JSON and gRPC with +json", async () => {
    const cases: [string, Record<string, string>][] = [
      ["additionalAuthenticatedData", { plaintext: "aGk=", additionalAuthenticatedData: "a===" }],
      ["additionalAuthenticatedData", { plaintext: "aGk=", additionalAuthenticatedData: " " }],
      ["plaintext", { plaintext: "aGk=aGk=" }],
      ["plaintext", { plaintext: "=aGk" }],
      ["plaintext", { plaintext: "aG k=" }],
      ["plaintext", { plaintext: "+/-_" }],
    ];
    for (const [field, fields] of cases) {
      const body = JSON.stringify({ keyId, keyVersionId: 1, ...fields });
      const rest = await fetch(`${server.url}/v1/encrypt`, { method: "POST", headers: { ...adminAuth(server.url), "content-type": "application/json" }, body });
      const restBody = (await rest.json()) as { message: string; details: { typeUrl: string; value: string }[] };
      expect([body, rest.status, restBody.message]).toEqual([body, 400, bytesMessage(field)]);
      const info = restBody.details.find((d) => d.typeUrl === "type.googleapis.com/google.rpc.ErrorInfo");
      expect(fromBinary(ErrorInfoSchema, Buffer.from(info?.value ?? "", "base64"))).toMatchObject({ reason: "REQUEST_INVALID", domain: "kms" });
      const connect = await fetch(`${server.url}/kms.v1.KeyManagerService/Encrypt`, {
        method: "POST",
        headers: { ...adminAuth(server.url), "content-type": "application/json", "connect-protocol-version": "1" },
        body,
      });
      expect([body, connect.status, await connect.json()]).toEqual([body, 400, expect.objectContaining({ code: "invalid_argument", message: bytesMessage(field) })]);
      const grpc = await rawCall(server.url, "/kms.v1.KeyManagerService/Encrypt", frame(Buffer.from(body)), { "content-type": "application/grpc+json", ...adminAuth(server.url) });
      expect([body, grpc.trailers["grpc-status"], decodeURIComponent(String(grpc.trailers["grpc-message"]))]).toEqual([body, "3", bytesMessage(field)]);
    }
    const decrypt = await fetch(`${server.url}/v1/decrypt`, {
      method: "POST",
      headers: { ...adminAuth(server.url), "content-type": "application/json" },
      body: JSON.stringify({ keyId, ciphertext: "AAAA AAAA" }),
    });
    expect([decrypt.status, ((await decrypt.json()) as { message: string }).message]).toEqual([400, bytesMessage("ciphertext")]);
  });

  it("both alphabets, padded or not, still encrypt and decrypt the same bytes", async () => {
    const plaintext = Buffer.from([0xfb, 0xff, 0xbf, 0x01]);
    const aad = Buffer.from([0xfe, 0xef]);
    for (const [p, a] of [
      [plaintext.toString("base64"), aad.toString("base64")],
      [plaintext.toString("base64url"), aad.toString("base64url")],
      [plaintext.toString("base64").replace(/=+$/, ""), aad.toString("base64").replace(/=+$/, "")],
    ]) {
      const enc = await fetch(`${server.url}/v1/encrypt`, {
        method: "POST",
        headers: { ...adminAuth(server.url), "content-type": "application/json" },
        body: JSON.stringify({ keyId, keyVersionId: 1, plaintext: p, additionalAuthenticatedData: a }),
      });
      expect(enc.status).toBe(200);
      const { ciphertext } = (await enc.json()) as { ciphertext: string };
      const dec = await fetch(`${server.url}/v1/decrypt`, {
        method: "POST",
        headers: { ...adminAuth(server.url), "content-type": "application/json" },
        body: JSON.stringify({ keyId, ciphertext, additionalAuthenticatedData: aad.toString("base64") }),
      });
      expect([p, dec.status, ((await dec.json()) as { plaintext: string }).plaintext]).toEqual([p, 200, plaintext.toString("base64")]);
    }
  });
});
