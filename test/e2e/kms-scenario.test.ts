import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeClock } from "../support/fake-clock.js";
import { createKmsClient, failureOf, protocols, restCall, restRequest } from "../support/kms-clients.js";
import type { AlgorithmName, KeyJson, KeyVersionJson, KmsClient, KmsFailure, Protocol } from "../support/kms-clients.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { storeRows } from "../support/store-rows.js";

// One life of a key, told the same way over gRPC, Connect JSON, Connect binary, gRPC-web and REST/JSON: create,
// encrypt and decrypt, versions, primary, disable and enable, destroy and restore, destruction and rotation by the
// (fake) clock, paging, update masks. Every client hands back the canonical proto3 JSON of the messages, which is
// exactly what the REST surface sends, so the same whole-object expectations hold on every protocol; on REST they
// are the literal response bodies (and the client checks 200 + application/json on every success).

const SECOND = 1000;
const T0 = Date.parse("2026-01-01T00:00:00Z");
const GRACE = 3600 * SECOND;
const PERIOD = 3600 * SECOND;
// The sweeper's own timer is pushed out of the way: the test runs it by hand after moving the clock.
const env = { DESTROY_GRACE_SECONDS: "3600", MIN_ROTATION_SECONDS: "60", SWEEP_INTERVAL_SECONDS: "86400" };

// The default algorithm each protocol's key is created with; none means the server's default, AES_256.
const givenAlgorithm: Record<Protocol, AlgorithmName | undefined> = {
  grpc: undefined,
  "connect-json": "AES_256",
  "connect-binary": "AES_128",
  "grpc-web": "AES_192",
  rest: undefined,
};

// A fake-clock time as proto3 JSON writes a Timestamp: RFC 3339 UTC, no fraction when whole seconds.
function iso(ms: number): string {
  return new Date(ms).toISOString().replace(".000Z", "Z");
}

const bytes = (text: string): Uint8Array => new Uint8Array(Buffer.from(text));
const text = (data: Uint8Array): string => Buffer.from(data).toString();

function materialRows(server: TestServer, keyId: string): Promise<{ id: number; erased: number }[]> {
  return storeRows(server, "SELECT id, CASE WHEN wrapped_material IS NULL THEN 1 ELSE 0 END AS erased FROM kms_versions WHERE key_id = ? ORDER BY id", [keyId]);
}

describe.each(protocols)("key management scenario over %s", (protocol) => {
  const clock = new FakeClock(T0);
  const algorithm: AlgorithmName = givenAlgorithm[protocol] ?? "AES_256";
  const namespace = `scenario-${protocol}`;
  let server: TestServer;
  let kms: KmsClient;

  // State carried from one step to the next, in order.
  let key: KeyJson;
  let keyId = "";
  let v1: KeyVersionJson;
  let v2: KeyVersionJson;
  let v1Ciphertext: Uint8Array;
  let v2Ciphertext: Uint8Array;

  // Moves the fake clock forward to T0 + ms.
  const at = (ms: number): void => {
    const delta = T0 + ms - clock.now();
    expect(delta).toBeGreaterThanOrEqual(0);
    clock.advance(delta);
  };

  const notEnabled = (failure: KmsFailure, versionId: number, state: string): void => {
    expect(failure).toMatchObject({
      code: 9,
      reason: "CRYPTO_KEY_VERSION_NOT_ENABLED",
      domain: "kms",
      message: `key version ${versionId} of key ${keyId} is not enabled, current state is: ${state}`,
    });
    expect(failure.preconditionViolations.map((v) => v.type)).toEqual(["STATE"]);
    if (protocol === "rest") expect(failure.httpStatus).toBe(400);
  };

  beforeAll(async () => {
    server = await startServer({ clock, env });
    kms = createKmsClient(protocol, server.url);
  });

  afterAll(async () => {
    await kms?.close();
    await server?.stop();
  });

  it("creates a key with version 1, ENABLED and primary", async () => {
    key = await kms.createKey({
      parentId: namespace,
      name: "scenario-key",
      description: "first description",
      labels: ["team=payments", "env:test"],
      rotationPeriodSeconds: 3600,
      defaultAlgorithm: givenAlgorithm[protocol],
    });
    keyId = key.id ?? "";
    expect(keyId).toMatch(/^[A-Za-z0-9._~-]+$/);
    v1 = { id: 1, keyId, state: "ENABLED", algorithm, createdAt: "2026-01-01T00:00:00Z" };
    expect(key).toEqual({
      id: keyId,
      name: "scenario-key",
      description: "first description",
      owner: server.adminId,
      primary: v1,
      labels: ["team=payments", "env:test"],
      rotationPeriod: "3600s",
      nextRotationTime: "2026-01-01T01:00:00Z",
      defaultAlgorithm: algorithm,
      createdAt: "2026-01-01T00:00:00Z",
    });
    expect(await kms.getKey(keyId)).toEqual(key);
    expect(await kms.getVersion(keyId, 1)).toEqual(v1);
  });

  it("encrypts and decrypts without AAD", async () => {
    const plaintext = bytes(`attack at dawn over ${protocol}`);
    const sealed = await kms.encrypt({ keyId, keyVersionId: 1, plaintext });
    expect(sealed.keyId).toBe(keyId);
    expect(sealed.keyVersionId).toBe(1);
    expect(sealed.ciphertext.length).toBeGreaterThan(plaintext.length);
    expect(Buffer.from(sealed.ciphertext).includes(Buffer.from(plaintext))).toBe(false);
    // A fresh random nonce each time.
    const again = await kms.encrypt({ keyId, keyVersionId: 1, plaintext });
    expect(Buffer.from(again.ciphertext).equals(Buffer.from(sealed.ciphertext))).toBe(false);
    v1Ciphertext = sealed.ciphertext;

    const opened = await kms.decrypt({ keyId, ciphertext: sealed.ciphertext });
    expect(opened.keyId).toBe(keyId);
    expect(opened.keyVersionId).toBe(1);
    expect(text(opened.plaintext)).toBe(`attack at dawn over ${protocol}`);
  });

  it("encrypts and decrypts with AAD; other AAD, or none, is CIPHERTEXT_INVALID", async () => {
    const aad = bytes("order=42");
    const sealed = await kms.encrypt({ keyId, keyVersionId: 1, plaintext: bytes("with aad"), aad });
    const opened = await kms.decrypt({ keyId, ciphertext: sealed.ciphertext, aad });
    expect(text(opened.plaintext)).toBe("with aad");
    expect(opened.keyVersionId).toBe(1);

    const wrong = await failureOf(kms.decrypt({ keyId, ciphertext: sealed.ciphertext, aad: bytes("order=43") }));
    expect(wrong).toMatchObject({ code: 3, reason: "CIPHERTEXT_INVALID", domain: "kms" });
    expect(wrong.fieldViolations.map((v) => v.field)).toEqual(["ciphertext"]);
    if (protocol === "rest") expect(wrong.httpStatus).toBe(400);
    const none = await failureOf(kms.decrypt({ keyId, ciphertext: sealed.ciphertext }));
    expect(none).toEqual(wrong);
  });

  it("creates version 2 with the key's default algorithm; it does not become primary", async () => {
    at(1 * SECOND);
    v2 = await kms.createVersion(keyId);
    expect(v2).toEqual({ id: 2, keyId, state: "ENABLED", algorithm, createdAt: "2026-01-01T00:00:01Z" });
    expect((await kms.getKey(keyId)).primary).toEqual(v1);
  });

  it("makes version 2 primary and encrypts with it", async () => {
    key = { ...key, primary: v2 };
    expect(await kms.setPrimary(keyId, 2)).toEqual(key);
    expect(await kms.getKey(keyId)).toEqual(key);
    const sealed = await kms.encrypt({ keyId, keyVersionId: 2, plaintext: bytes("under v2") });
    expect(sealed.keyVersionId).toBe(2);
    v2Ciphertext = sealed.ciphertext;
    const opened = await kms.decrypt({ keyId, ciphertext: v2Ciphertext });
    expect(opened.keyVersionId).toBe(2);
    expect(text(opened.plaintext)).toBe("under v2");
  });

  it("a disabled version 1 neither decrypts nor encrypts; enabled again, it does", async () => {
    expect(await kms.disableVersion(keyId, 1)).toEqual({ ...v1, state: "DISABLED" });
    notEnabled(await failureOf(kms.decrypt({ keyId, ciphertext: v1Ciphertext })), 1, "DISABLED");
    notEnabled(await failureOf(kms.encrypt({ keyId, keyVersionId: 1, plaintext: bytes("x") })), 1, "DISABLED");
    // Asking for the state it is already in returns it unchanged.
    expect(await kms.disableVersion(keyId, 1)).toEqual({ ...v1, state: "DISABLED" });

    expect(await kms.enableVersion(keyId, 1)).toEqual(v1);
    expect(text((await kms.decrypt({ keyId, ciphertext: v1Ciphertext })).plaintext)).toBe(`attack at dawn over ${protocol}`);
  });

  it("destroy schedules version 1 for now + the grace period; restore makes it DISABLED again", async () => {
    at(600 * SECOND);
    const scheduled = { ...v1, state: "DESTROYED_SCHEDULED" as const, destroyAt: "2026-01-01T01:10:00Z" };
    expect(iso(clock.now() + GRACE)).toBe(scheduled.destroyAt);
    expect(await kms.destroyVersion(keyId, 1)).toEqual(scheduled);
    expect(await kms.getVersion(keyId, 1)).toEqual(scheduled);
    notEnabled(await failureOf(kms.decrypt({ keyId, ciphertext: v1Ciphertext })), 1, "DESTROYED_SCHEDULED");

    const restored = await kms.restoreVersion(keyId, 1);
    expect(restored).toEqual({ ...v1, state: "DISABLED" });
    expect(restored).not.toHaveProperty("destroyAt");
    expect(await kms.getVersion(keyId, 1)).toEqual({ ...v1, state: "DISABLED" });

    expect(await kms.destroyVersion(keyId, 1)).toEqual(scheduled);
  });

  it("rotates at nextRotationTime: a new primary with the default algorithm, the next time one period on", async () => {
    // Due at 01:00:00, before version 1's destruction at 01:10:00.
    at(PERIOD + 1 * SECOND);
    await server.app.sweeper.runOnce();
    const v3: KeyVersionJson = { id: 3, keyId, state: "ENABLED", algorithm, createdAt: "2026-01-01T01:00:01Z" };
    key = { ...key, primary: v3, nextRotationTime: "2026-01-01T02:00:00Z" };
    expect(await kms.getKey(keyId)).toEqual(key);
    expect(Date.parse(key.nextRotationTime ?? "") - T0).toBe(2 * PERIOD);
    expect((await kms.encrypt({ keyId, keyVersionId: 3, plaintext: bytes("v3") })).keyVersionId).toBe(3);

    // Nothing more is due: another run changes nothing.
    await server.app.sweeper.runOnce();
    expect(await kms.getKey(keyId)).toEqual(key);
    expect((await kms.getVersion(keyId, 1)).state).toBe("DESTROYED_SCHEDULED");
    expect(text((await kms.decrypt({ keyId, ciphertext: v2Ciphertext })).plaintext)).toBe("under v2");
  });

  it("past destroyAt version 1 is DESTROYED, and the sweeper erases its material from storage", async () => {
    at(4200 * SECOND + 1);
    // Treated as destroyed at once, before the sweeper has run.
    expect((await kms.getVersion(keyId, 1)).state).toBe("DESTROYED");
    await server.app.sweeper.runOnce();
    expect(await kms.getVersion(keyId, 1)).toMatchObject({ id: 1, keyId, state: "DESTROYED", algorithm, createdAt: v1.createdAt });
    expect(await materialRows(server, keyId)).toEqual([
      { id: 1, erased: 1 },
      { id: 2, erased: 0 },
      { id: 3, erased: 0 },
    ]);
    notEnabled(await failureOf(kms.decrypt({ keyId, ciphertext: v1Ciphertext })), 1, "DESTROYED");
    const enable = await failureOf(kms.enableVersion(keyId, 1));
    expect(enable).toMatchObject({ code: 9, reason: "CRYPTO_KEY_VERSION_STATE_TRANSITION" });
    expect(text((await kms.decrypt({ keyId, ciphertext: v2Ciphertext })).plaintext)).toBe("under v2");
  });

  it("lists keys and versions page by page, oldest first", async () => {
    const pagingNamespace = `paging-${protocol}`;
    const created: KeyJson[] = [];
    for (let i = 0; i < 5; i++) {
      created.push(await kms.createKey({ parentId: pagingNamespace, name: `page-key-${i}` }));
      clock.advance(1);
    }
    expect(created.map((k) => k.createdAt)).toEqual([0, 1, 2, 3, 4].map((ms) => iso(T0 + 4200 * SECOND + 1 + ms)));

    expect(await kms.listKeys(pagingNamespace, { limit: 2, offset: 2 })).toEqual([created[2], created[3]]);
    expect(await kms.listKeys(pagingNamespace, { limit: 2 })).toEqual([created[0], created[1]]);
    expect(await kms.listKeys(pagingNamespace, { offset: 4 })).toEqual([created[4]]);
    expect(await kms.listKeys(pagingNamespace, { offset: 5 })).toEqual([]);
    expect(await kms.listKeys(pagingNamespace)).toEqual(created);
    // 0 means the default of 100.
    expect(await kms.listKeys(pagingNamespace, { limit: 0 })).toEqual(created);
    expect(await kms.listKeys(`empty-${protocol}`)).toEqual([]);
    expect(await kms.listKeys(namespace)).toEqual([key]);

    const versions = await kms.listVersions(keyId);
    expect(versions.map((v) => [v.id, v.state])).toEqual([
      [1, "DESTROYED"],
      [2, "ENABLED"],
      [3, "ENABLED"],
    ]);
    expect(await kms.listVersions(keyId, { limit: 2, offset: 1 })).toEqual(versions.slice(1));
    expect(await kms.listVersions(keyId, { limit: 1 })).toEqual(versions.slice(0, 1));
    expect(await kms.listVersions(keyId, { offset: 3 })).toEqual([]);

    // A version's algorithm is the given one when given (seed rule 3).
    const first = created[0]?.id ?? "";
    expect(await kms.createVersion(first, "AES_192")).toMatchObject({ id: 2, keyId: first, state: "ENABLED", algorithm: "AES_192" });
    expect((await kms.listVersions(first)).map((v) => [v.id, v.algorithm])).toEqual([
      [1, "AES_256"],
      [2, "AES_192"],
    ]);
  });

  it("updates only the fields the mask names", async () => {
    const updated = await kms.updateKey(keyId, { name: "renamed", description: "second description", labels: ["not-applied"] }, ["name", "description"]);
    key = { ...key, name: "renamed", description: "second description" };
    expect(updated).toEqual(key);
    expect(await kms.getKey(keyId)).toEqual(key);
    expect(key.labels).toEqual(["team=payments", "env:test"]);
  });

  it("DestroyCryptoKey returns an empty object and schedules every version, the primary included", async () => {
    const [doomed] = await kms.listKeys(`paging-${protocol}`, { limit: 1, offset: 4 });
    const doomedId = doomed?.id ?? "";
    expect(await kms.destroyKey(doomedId)).toEqual({});
    expect(await kms.getVersion(doomedId, 1)).toEqual({
      ...doomed?.primary,
      state: "DESTROYED_SCHEDULED",
      destroyAt: iso(clock.now() + GRACE),
    });
    const failure = await failureOf(kms.encrypt({ keyId: doomedId, keyVersionId: 1, plaintext: bytes("no") }));
    expect(failure).toMatchObject({ code: 9, reason: "CRYPTO_KEY_VERSION_NOT_ENABLED" });
  });

  it("a destroyed key serves nothing and takes no version until a restored, enabled version is made primary", async () => {
    const doomed = await kms.createKey({ parentId: namespace, name: "destroyed-then-saved" });
    const id = doomed.id ?? "";
    await kms.createVersion(id);
    const sealed = (await kms.encrypt({ keyId: id, keyVersionId: 2, plaintext: bytes("kept") })).ciphertext;
    await kms.destroyKey(id);
    await kms.restoreVersion(id, 2);
    expect((await kms.enableVersion(id, 2)).state).toBe("ENABLED");

    // Version 2 is ENABLED, but its key is still being destroyed: the primary, version 1, is not ENABLED.
    const scheduled = (failure: KmsFailure): void => {
      expect(failure).toMatchObject({
        code: 9,
        reason: "CRYPTO_KEY_DESTRUCTION_SCHEDULED",
        domain: "kms",
        message: `key ${id} is scheduled for destruction: it serves no Encrypt or Decrypt and takes no new version until one of its versions is restored, enabled and made primary`,
      });
      expect(failure.preconditionViolations).toEqual([{ type: "STATE", subject: `keys/${id}`, description: failure.message }]);
      if (protocol === "rest") expect(failure.httpStatus).toBe(400);
    };
    scheduled(await failureOf(kms.encrypt({ keyId: id, keyVersionId: 2, plaintext: bytes("no") })));
    scheduled(await failureOf(kms.decrypt({ keyId: id, ciphertext: sealed })));
    scheduled(await failureOf(kms.createVersion(id)));
    expect((await kms.listVersions(id)).map((v) => [v.id, v.state])).toEqual([[1, "DESTROYED_SCHEDULED"], [2, "ENABLED"]]);

    // The table of CONTRACT section 5 keeps only an ENABLED primary from being destroyed.
    expect((await kms.restoreVersion(id, 1)).state).toBe("DISABLED");
    expect((await kms.destroyVersion(id, 1)).state).toBe("DESTROYED_SCHEDULED");

    expect((await kms.setPrimary(id, 2)).primary).toMatchObject({ id: 2, state: "ENABLED" });
    expect(text((await kms.decrypt({ keyId: id, ciphertext: sealed })).plaintext)).toBe("kept");
    expect((await kms.encrypt({ keyId: id, keyVersionId: 2, plaintext: bytes("again") })).keyVersionId).toBe(2);
    expect((await kms.createVersion(id)).id).toBe(3);
  });

  it("once every version of a destroyed key is destroyed, the key is gone and its name is free", async () => {
    const pagingNamespace = `paging-${protocol}`;
    const [doomed] = await kms.listKeys(pagingNamespace, { limit: 1, offset: 4 });
    const doomedId = doomed?.id ?? "";
    expect(doomed?.name).toBe("page-key-4");
    // Before the grace period ends the key still exists, and so does its name.
    const taken = await failureOf(kms.createKey({ parentId: pagingNamespace, name: "page-key-4" }));
    expect(taken).toMatchObject({ code: 6, reason: "CRYPTO_KEY_NAME_TAKEN" });

    clock.advance(GRACE);
    const gone = await failureOf(kms.getKey(doomedId));
    expect(gone).toMatchObject({ code: 5, reason: "CRYPTO_KEY_NOT_FOUND", resourceInfo: { resourceName: doomedId } });
    if (protocol === "rest") expect(gone.httpStatus).toBe(404);
    expect((await kms.listKeys(pagingNamespace)).map((k) => k.name)).toEqual(["page-key-0", "page-key-1", "page-key-2", "page-key-3"]);
    const reborn = await kms.createKey({ parentId: pagingNamespace, name: "page-key-4" });
    expect(reborn.id).not.toBe(doomedId);
    expect(reborn.primary).toMatchObject({ id: 1, state: "ENABLED" });
  });
});

// What only the REST/JSON surface has: the literal bodies and headers, proto field names and numeric strings.
describe("key management over REST/JSON: literal bodies, proto names, numeric strings", () => {
  const clock = new FakeClock(T0);
  let server: TestServer;
  let url = "";

  beforeAll(async () => {
    server = await startServer({ clock, env });
    url = server.url;
  });

  afterAll(async () => {
    await server?.stop();
  });

  it("answers 200 application/json with the exact CryptoKey body", async () => {
    const res = await restRequest(url, "POST", "/v1/keys", {
      body: { parentId: "literal", name: "k", labels: ["a"], rotationPeriod: "86400s", defaultAlgorithm: "AES_192" },
    });
    expect(res.status).toBe(200);
    expect(res.contentType).toBe("application/json");
    const id = (res.json as { id: string }).id;
    expect(res.json).toEqual({
      id,
      name: "k",
      owner: server.adminId,
      primary: { id: 1, keyId: id, state: "ENABLED", algorithm: "AES_192", createdAt: "2026-01-01T00:00:00Z" },
      labels: ["a"],
      rotationPeriod: "86400s",
      nextRotationTime: "2026-01-02T00:00:00Z",
      defaultAlgorithm: "AES_192",
      createdAt: "2026-01-01T00:00:00Z",
    });

    clock.advance(1500);
    const destroyed = await restRequest(url, "POST", `/v1/keys/${id}/versions`, { body: {} });
    expect(destroyed.json).toEqual({ id: 2, keyId: id, state: "ENABLED", algorithm: "AES_192", createdAt: "2026-01-01T00:00:01.500Z" });
    const scheduled = await restRequest(url, "DELETE", `/v1/keys/${id}/versions/2`);
    expect(scheduled.status).toBe(200);
    expect(scheduled.contentType).toBe("application/json");
    expect(scheduled.json).toEqual({
      id: 2,
      keyId: id,
      state: "DESTROYED_SCHEDULED",
      algorithm: "AES_192",
      createdAt: "2026-01-01T00:00:01.500Z",
      destroyAt: "2026-01-01T01:00:01.500Z",
    });
  });

  it("accepts keyVersionId as the string \"1\" and proto names (key_version_id, parent_id)", async () => {
    const created = await restCall(url, "POST", "/v1/keys", { parent_id: "proto-names", default_algorithm: "AES_128" });
    const keyId = String(created.id);
    expect(created.defaultAlgorithm).toBe("AES_128");
    const plaintext = Buffer.from("numeric strings").toString("base64");

    const asString = await restCall(url, "POST", "/v1/encrypt", { keyId, keyVersionId: "1", plaintext });
    expect(asString).toEqual({ keyId, keyVersionId: 1, ciphertext: expect.any(String) });
    const protoNames = await restCall(url, "POST", "/v1/encrypt", {
      key_id: keyId,
      key_version_id: "1",
      plaintext,
      additional_authenticated_data: Buffer.from("aad").toString("base64"),
    });
    expect(protoNames).toEqual({ keyId, keyVersionId: 1, ciphertext: expect.any(String) });

    expect(await restCall(url, "POST", "/v1/decrypt", { keyId, ciphertext: asString.ciphertext ?? "" })).toEqual({ keyId, keyVersionId: 1, plaintext });
    expect(
      await restCall(url, "POST", "/v1/decrypt", {
        key_id: keyId,
        ciphertext: protoNames.ciphertext ?? "",
        additional_authenticated_data: Buffer.from("aad").toString("base64"),
      }),
    ).toEqual({ keyId, keyVersionId: 1, plaintext });

    const listed = await restCall(url, "GET", "/v1/keys?parent_id=proto-names&page.limit=10");
    expect(listed).toEqual({ keys: [created] });
    expect(await restCall(url, "GET", "/v1/keys?parentId=proto-names&page.limit=1&page.offset=1")).toEqual({});
  });

  it("accepts URL-safe base64 bytes and enum numbers on input", async () => {
    const created = await restCall(url, "POST", "/v1/keys", { parentId: "input-forms", defaultAlgorithm: 1 });
    expect(created.defaultAlgorithm).toBe("AES_128");
    const keyId = String(created.id);
    // Bytes whose standard base64 has "+" and "/": URL-safe is "-" and "_".
    const data = Buffer.from([0xfb, 0xff, 0xbf, 0xfe, 0x3e, 0x3f]);
    const urlSafe = data.toString("base64url");
    expect(urlSafe).toMatch(/[-_]/);
    const sealed = await restCall(url, "POST", "/v1/encrypt", { keyId, keyVersionId: 1, plaintext: urlSafe, additionalAuthenticatedData: urlSafe });
    const ciphertext = Buffer.from(String(sealed.ciphertext), "base64").toString("base64url");
    const opened = await restCall(url, "POST", "/v1/decrypt", { keyId, ciphertext, additionalAuthenticatedData: urlSafe });
    expect(opened).toEqual({ keyId, keyVersionId: 1, plaintext: data.toString("base64") });
    expect(await restCall(url, "POST", `/v1/keys/${keyId}/versions`, { algorithm: 2 })).toMatchObject({ id: 2, algorithm: "AES_192" });
  });

  it("takes the mask of UpdateCryptoKey as the string \"name,description\" and the key id from {key.id}", async () => {
    const created = await restCall(url, "POST", "/v1/keys", { parentId: "masks", name: "before", labels: ["keep"] });
    const id = String(created.id);
    const updated = await restCall(url, "PATCH", `/v1/keys/${id}`, {
      key: { name: "after", description: "described", labels: ["dropped"] },
      updateMask: "name,description",
    });
    expect(updated).toEqual({ ...created, name: "after", description: "described" });
  });

  it("DestroyCryptoKey answers the literal body {}", async () => {
    const created = await restCall(url, "POST", "/v1/keys", { parentId: "destroy-literal" });
    const res = await restRequest(url, "DELETE", `/v1/keys/${String(created.id)}`);
    expect(res.status).toBe(200);
    expect(res.contentType).toBe("application/json");
    expect(res.text).toBe("{}");
  });
});
