import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeClock } from "../support/fake-clock.js";
import { createKmsClient, failureOf, restCall } from "../support/kms-clients.js";
import type { KmsClient, KmsFailure } from "../support/kms-clients.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { AUDIT_TABLE, auditRecords, storeSnapshot } from "../support/store-snapshot.js";
import { injectWriteFailure } from "../support/write-failure.js";

// Every KMS mutation that can fail after the request itself was found valid (a rule that depends on stored state,
// or storage failing halfway through the write) answers its exact code and leaves every row of the store as it
// was, but for the one audit record of the refusal. Request validation failures are not here: they fail before any
// transaction starts.

const MINUTE_MS = 60 * 1000;
const settings = { DESTROY_GRACE_SECONDS: "60", MIN_ROTATION_SECONDS: "60", SWEEP_INTERVAL_SECONDS: "86400" };

let server: TestServer;
let kms: KmsClient;
const clock = new FakeClock();

beforeAll(async () => {
  server = await startServer({ clock, env: settings });
  kms = createKmsClient("rest", server.url);
});

afterAll(async () => {
  await kms.close();
  await server.stop();
});

// Not the calls' doing: the task worker's heartbeat, written by a timer of its own once the fake clock has moved.
const notWrittenByCalls = [AUDIT_TABLE, "compute_workers"];

// Runs a call that must fail, checks that the store is exactly as before it but for the audit record of the
// refusal (the admin's, with the code answered), and returns the failure.
async function failsCommittingNothing(call: () => Promise<unknown>): Promise<KmsFailure> {
  const before = storeSnapshot(server.dataDir, { except: notWrittenByCalls });
  const recorded = auditRecords(server.dataDir).length;
  const failure = await failureOf(call());
  expect(storeSnapshot(server.dataDir, { except: notWrittenByCalls })).toEqual(before);
  expect(auditRecords(server.dataDir).slice(recorded)).toEqual([expect.objectContaining({ principal: server.adminId, code: failure.code })]);
  return failure;
}

// UpdateCryptoKey with a nextRotationTime, which the test clients do not send: plain REST.
function setNextRotation(keyId: string, time: string): Promise<unknown> {
  return restCall(server.url, "PATCH", `/v1/keys/${keyId}`, { key: { nextRotationTime: time }, updateMask: "nextRotationTime" });
}

// A key with versions 1 (primary) and 2, both ENABLED.
async function keyWithTwoVersions(): Promise<string> {
  const id = (await kms.createKey({ parentId: "fw" })).id!;
  await kms.createVersion(id);
  return id;
}

const iso = (ms: number) => new Date(ms).toISOString();

describe("a KMS mutation refused by a rule on the stored state", () => {
  it("CreateCryptoKey with a name taken in the namespace: ALREADY_EXISTS", async () => {
    await kms.createKey({ parentId: "fw", name: "taken" });
    const failure = await failsCommittingNothing(() => kms.createKey({ parentId: "fw", name: "taken" }));
    expect([failure.code, failure.reason]).toEqual([6, "CRYPTO_KEY_NAME_TAKEN"]);
  });

  it("UpdateCryptoKey to a taken name: ALREADY_EXISTS", async () => {
    await kms.createKey({ parentId: "fw", name: "held" });
    const id = (await kms.createKey({ parentId: "fw", name: "mine" })).id!;
    const failure = await failsCommittingNothing(() => kms.updateKey(id, { name: "held", description: "d" }, ["name", "description"]));
    expect([failure.code, failure.reason]).toEqual([6, "CRYPTO_KEY_NAME_TAKEN"]);
  });

  it("UpdateCryptoKey with a nextRotationTime on a key without rotationPeriod, or one in the past: INVALID_ARGUMENT", async () => {
    const still = (await kms.createKey({ parentId: "fw" })).id!;
    let failure = await failsCommittingNothing(() => setNextRotation(still, iso(clock.now() + 60 * MINUTE_MS)));
    expect([failure.code, failure.fieldViolations]).toEqual([3, [{ field: "key.nextRotationTime", description: "a next rotation time needs a rotationPeriod" }]]);
    const rotating = (await kms.createKey({ parentId: "fw", rotationPeriodSeconds: 3600 })).id!;
    failure = await failsCommittingNothing(() => setNextRotation(rotating, iso(clock.now() - MINUTE_MS)));
    expect([failure.code, failure.fieldViolations]).toEqual([3, [{ field: "key.nextRotationTime", description: "must be in the future" }]]);
  });

  it("a transition the state machine forbids: FAILED_PRECONDITION", async () => {
    const id = await keyWithTwoVersions();
    await kms.destroyVersion(id, 2);
    const cases: [() => Promise<unknown>, string][] = [
      [() => kms.disableVersion(id, 1), "CRYPTO_KEY_VERSION_IS_PRIMARY"],
      [() => kms.destroyVersion(id, 1), "CRYPTO_KEY_VERSION_IS_PRIMARY"],
      [() => kms.restoreVersion(id, 1), "CRYPTO_KEY_VERSION_STATE_TRANSITION"],
      [() => kms.enableVersion(id, 2), "CRYPTO_KEY_VERSION_STATE_TRANSITION"],
    ];
    for (const [call, reason] of cases) {
      const failure = await failsCommittingNothing(call);
      expect([failure.code, failure.reason]).toEqual([9, reason]);
    }
  });

  it("UpdateCryptoKeyPrimaryVersion to a version that is not ENABLED: FAILED_PRECONDITION", async () => {
    const id = await keyWithTwoVersions();
    await kms.disableVersion(id, 2);
    const failure = await failsCommittingNothing(() => kms.setPrimary(id, 2));
    expect([failure.code, failure.reason]).toEqual([9, "CRYPTO_KEY_VERSION_NOT_ENABLED"]);
  });

  it("a mutation of a version the key never had, or of a key that is gone: NOT_FOUND", async () => {
    const id = await keyWithTwoVersions();
    let failure = await failsCommittingNothing(() => kms.disableVersion(id, 3));
    expect([failure.code, failure.reason]).toEqual([5, "CRYPTO_KEY_VERSION_NOT_FOUND"]);
    failure = await failsCommittingNothing(() => kms.setPrimary(id, 3));
    expect([failure.code, failure.reason]).toEqual([5, "CRYPTO_KEY_VERSION_NOT_FOUND"]);
    await kms.destroyKey(id);
    // Gone by the clock, before the sweeper has erased anything: the rows are still there and must stay as they are.
    clock.advance(MINUTE_MS);
    for (const call of [() => kms.destroyKey(id), () => kms.createVersion(id), () => kms.restoreVersion(id, 1)]) {
      failure = await failsCommittingNothing(call);
      expect([failure.code, failure.reason]).toEqual([5, "CRYPTO_KEY_NOT_FOUND"]);
    }
  });
});

describe("a KMS mutation whose write fails in storage halfway through", () => {
  it("answers INTERNAL without the cause, commits nothing, and the cache keeps the committed state", async () => {
    const id = await keyWithTwoVersions();
    // Every key and version write starts with the key row, so failing the version rows fails after a first write.
    let heal = injectWriteFailure(server.dataDir, "kms_versions", "INSERT");
    const insertingVersions: (() => Promise<unknown>)[] = [
      () => kms.createKey({ parentId: "fw", name: "never" }),
      () => kms.createVersion(id),
      () => kms.disableVersion(id, 2),
      () => kms.destroyVersion(id, 2),
      () => kms.destroyKey(id),
    ];
    for (const call of insertingVersions) {
      const failure = await failsCommittingNothing(call);
      expect(failure.code).toBe(13);
      expect(failure.message).not.toMatch(/injected|sqlite|trigger/i);
    }
    heal();
    heal = injectWriteFailure(server.dataDir, "kms_keys", "UPDATE");
    for (const call of [() => kms.setPrimary(id, 2), () => kms.updateKey(id, { description: "never" }, ["description"])]) {
      expect((await failsCommittingNothing(call)).code).toBe(13);
    }
    heal();

    // Served from the cache: version 2 still ENABLED, version 3 never made.
    await kms.encrypt({ keyId: id, keyVersionId: 2, plaintext: Buffer.from("x") });
    const missing = await failureOf(kms.encrypt({ keyId: id, keyVersionId: 3, plaintext: Buffer.from("x") }));
    expect([missing.code, missing.reason]).toEqual([5, "CRYPTO_KEY_VERSION_NOT_FOUND"]);
    expect((await kms.createVersion(id)).id).toBe(3);
    expect((await kms.getKey(id)).primary?.id).toBe(1);
  });

  it("rotation and the sweeper commit nothing either", async () => {
    const rotating = (await kms.createKey({ parentId: "fw", rotationPeriodSeconds: 60 })).id!;
    const destroying = await keyWithTwoVersions();
    await kms.destroyVersion(destroying, 2);
    clock.advance(MINUTE_MS);
    const heal = injectWriteFailure(server.dataDir, "kms_versions", "INSERT");
    const before = storeSnapshot(server.dataDir, { except: ["compute_workers"] });
    // One at a time: a sweeper run stops at its first failure, before rotating anything.
    await expect(server.app.manager.sweepDestroyed()).rejects.toThrow();
    await expect(server.app.manager.rotateDue()).rejects.toThrow();
    expect(storeSnapshot(server.dataDir, { except: ["compute_workers"] })).toEqual(before);
    heal();
    await server.app.sweeper.runOnce();
    expect((await kms.getKey(rotating)).primary?.id).toBe(2);
    expect((await kms.getVersion(destroying, 2)).state).toBe("DESTROYED");
  });
});
