import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { adminJson, makePrincipal } from "../support/principals.js";
import type { AuditJsonLine, Principal } from "../support/principals.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { wireCall } from "../support/wire-call.js";
import type { WireAnswer, WireProtocol } from "../support/wire-call.js";

// A hostile-client probe (reproduced twice): the audit record's resource was the method's REST path with the caller's
// ids put in raw, so an editor of namespace nsa, calling Encrypt with keyId "<a key of nsb>/versions/1", was refused
// NOT_FOUND and yet left a record with resource /v1/keys/<that key>/versions/1, which `cloudplane-admin audit
// --resource /v1/keys/<that key>` listed among the key's own: the string a real call on version 1 of that key makes.
// The ids are percent-encoded now, as a REST URL carries them (docs/access.md, "Audit trail"). Here the victim's
// trail, as the operator command filters it, must hold the real calls on the key and nothing else, and the forging
// attempts must still be found, by principal or by their own (encoded) path.

const kms = KeyManagerService.method;


let server: TestServer;
let owner: Principal;
let forger: Principal;
let victim: string;
let since: string;

async function expectCode(protocol: WireProtocol, answer: Promise<WireAnswer>, code: number): Promise<void> {
  const { code: got, message } = await answer;
  expect({ protocol, code: got, message }).toMatchObject({ protocol, code });
}

beforeAll(async () => {
  server = await startServer();
  since = new Date().toISOString();
  owner = await makePrincipal(server, "owner-b", [["editor", "kms-namespace:nsb"]]);
  forger = await makePrincipal(server, "ed-a", [["editor", "kms-namespace:nsa"]]);

  // The victim's key, and real calls on it by its owner.
  const created = await wireCall(server.url, "rest", kms.createCryptoKey, { parentId: "nsb", name: "victim" }, owner.auth);
  victim = (created.response as { id: string }).id;
  await expectCode("rest", wireCall(server.url, "rest", kms.encrypt, { keyId: victim, keyVersionId: 1, plaintext: Buffer.from("p") }, owner.auth), 0);
  await expectCode("grpc", wireCall(server.url, "grpc", kms.createCryptoKeyVersion, { keyId: victim }, owner.auth), 0);
  await expectCode("rest", wireCall(server.url, "rest", kms.disableCryptoKeyVersion, { keyId: victim, keyVersionId: 2 }, owner.auth), 0);

  // The forging attempts, over REST and gRPC: each is refused as a key that does not exist.
  for (const protocol of ["rest", "grpc"] as const) {
    for (const keyId of [`${victim}/versions/1`, `${victim}/versions/1/disable`]) {
      await expectCode(protocol, wireCall(server.url, protocol, kms.encrypt, { keyId, keyVersionId: 1, plaintext: Buffer.from("p") }, forger.auth), 5);
    }
    // REST: POST /v1/keys/<victim>%2Fversions%2F1/versions/1/disable, whose key id the router decodes.
    await expectCode(protocol, wireCall(server.url, protocol, kms.disableCryptoKeyVersion, { keyId: `${victim}/versions/1`, keyVersionId: 1 }, forger.auth), 5);
    await expectCode(protocol, wireCall(server.url, protocol, kms.getCryptoKey, { keyId: `${victim}/../${victim}` }, forger.auth), 5);
  }
  // A namespace is a scope: one that only starts like the victim's is not it.
  await expectCode("rest", wireCall(server.url, "rest", kms.listCryptoKeys, { parentId: "nsb/x" }, forger.auth), 7);
  // And a genuine attempt on the victim's key itself: refused as a key that does not exist, and about that key.
  await expectCode("grpc", wireCall(server.url, "grpc", kms.getCryptoKey, { keyId: victim }, forger.auth), 5);
});

afterAll(async () => {
  await server?.stop();
});

const rows = (lines: AuditJsonLine[]) => lines.map((l) => [l.principal === owner.id ? "owner-b" : l.principal === forger.id ? "ed-a" : l.principal, l.method.split("/")[1], l.protocol, l.scope, l.resource, l.code]);

describe("a caller's ids cannot plant records in another namespace's key trail", () => {
  it("the victim key's trail, as `audit --resource /v1/keys/<id>` filters it, holds the real calls on that key only", async () => {
    const trail = await adminJson<AuditJsonLine>(server.dataDir, ["audit", "--since", since, "--resource", `/v1/keys/${victim}`]);
    expect(rows(trail)).toEqual([
      ["owner-b", "Encrypt", "rest", "kms-namespace:nsb", `/v1/keys/${victim}`, 0],
      ["owner-b", "CreateCryptoKeyVersion", "grpc", "kms-namespace:nsb", `/v1/keys/${victim}/versions`, 0],
      ["owner-b", "DisableCryptoKeyVersion", "rest", "kms-namespace:nsb", `/v1/keys/${victim}/versions/2/disable`, 0],
      // The forger's call that did name the key: refused on the key's namespace, as a key that does not exist.
      ["ed-a", "GetCryptoKey", "grpc", "kms-namespace:nsb", `/v1/keys/${victim}`, 5],
    ]);
    // The namespace's trail likewise: its key's creation and the calls above, not a scope that only starts like it.
    const scope = await adminJson<AuditJsonLine>(server.dataDir, ["audit", "--since", since, "--resource", "kms-namespace:nsb"]);
    expect(rows(scope).map((r) => r.slice(0, 2))).toEqual([
      ["owner-b", "CreateCryptoKey"],
      ["owner-b", "Encrypt"],
      ["owner-b", "CreateCryptoKeyVersion"],
      ["owner-b", "DisableCryptoKeyVersion"],
      ["ed-a", "GetCryptoKey"],
    ]);
  });

  it("records each forging attempt with the id it sent percent-encoded, found by its principal", async () => {
    const attempts = await adminJson<AuditJsonLine>(server.dataDir, ["audit", "--since", since, "--principal", "ed-a"]);
    const attempt = (protocol: string): unknown[][] => [
      ["ed-a", "Encrypt", protocol, "", `/v1/keys/${victim}%2Fversions%2F1`, 5],
      ["ed-a", "Encrypt", protocol, "", `/v1/keys/${victim}%2Fversions%2F1%2Fdisable`, 5],
      ["ed-a", "DisableCryptoKeyVersion", protocol, "", `/v1/keys/${victim}%2Fversions%2F1/versions/1/disable`, 5],
      ["ed-a", "GetCryptoKey", protocol, "", `/v1/keys/${victim}%2F..%2F${victim}`, 5],
    ];
    expect(rows(attempts.filter((l) => l.method !== "compute.auth.v2.AuthService/ServiceAuth"))).toEqual([
      ...attempt("rest"),
      ...attempt("grpc"),
      ["ed-a", "ListCryptoKeys", "rest", "kms-namespace:nsb/x", "/v1/keys", 7],
      ["ed-a", "GetCryptoKey", "grpc", "kms-namespace:nsb", `/v1/keys/${victim}`, 5],
    ]);
  });

  it("finds an attempt by the path it made, escapes in either case, and everything under it", async () => {
    const byPath = await adminJson<AuditJsonLine>(server.dataDir, ["audit", "--since", since, "--resource", `/v1/keys/${victim}%2fversions%2f1`]);
    expect(rows(byPath).map((r) => [r[1], r[2], r[4]])).toEqual([
      ["Encrypt", "rest", `/v1/keys/${victim}%2Fversions%2F1`],
      ["DisableCryptoKeyVersion", "rest", `/v1/keys/${victim}%2Fversions%2F1/versions/1/disable`],
      ["Encrypt", "grpc", `/v1/keys/${victim}%2Fversions%2F1`],
      ["DisableCryptoKeyVersion", "grpc", `/v1/keys/${victim}%2Fversions%2F1/versions/1/disable`],
    ]);
  });
});
