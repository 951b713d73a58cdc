import { afterAll, describe, expect, it } from "vitest";
import { FakeClock } from "../support/fake-clock.js";
import { createKmsClient, failureOf } from "../support/kms-clients.js";
import type { KmsClient, KmsFailure } from "../support/kms-clients.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { storeSnapshot } from "../support/store-snapshot.js";
import { tempDir } from "../support/temp-dir.js";

// A server restarted on its data directory with another master key cannot unwrap any stored material. Every call
// that needs it answers INTERNAL (a server fault) and commits nothing, rotation and the sweeper included; back on
// the right master key everything works as if the misconfigured run had never happened.

const KEY_A = Buffer.alloc(32, 1).toString("base64");
const KEY_B = Buffer.alloc(32, 2).toString("base64");
const HOUR_MS = 3600 * 1000;
// The sweeper runs only when the test says so, and destruction and rotation come due within the test.
const settings = { DESTROY_GRACE_SECONDS: "60", MIN_ROTATION_SECONDS: "60", SWEEP_INTERVAL_SECONDS: "86400" };

const text = (bytes: Uint8Array) => Buffer.from(bytes).toString();

// INTERNAL with nothing of the cause (a GCM authentication failure) in the message.
function expectServerFault(failure: KmsFailure): void {
  expect(failure.code).toBe(13);
  expect(failure.httpStatus).toBe(500);
  expect(failure.message).not.toMatch(/authenticat|decipher|unsupported state|master/i);
}

describe("a server restarted with the wrong master key", () => {
  const dir = tempDir();
  const clock = new FakeClock();
  let server: TestServer | undefined;
  let kms: KmsClient | undefined;

  async function restart(masterKey: string): Promise<KmsClient> {
    await kms?.close();
    await server?.stop();
    server = await startServer({ dataDir: dir.path, clock, env: { ...settings, MASTER_KEY: masterKey } });
    kms = createKmsClient("rest", server.url);
    return kms;
  }

  afterAll(async () => {
    await kms?.close();
    await server?.stop();
    dir.remove();
  });

  it("commits nothing, and the right master key finds every key as it was", async () => {
    let client = await restart(KEY_A);
    const plain = await client.createKey({ parentId: "wmk" });
    const plainId = plain.id!;
    const sealed = await client.encrypt({ keyId: plainId, keyVersionId: 1, plaintext: Buffer.from("made under A") });
    const twoVersions = (await client.createKey({ parentId: "wmk" })).id!;
    await client.createVersion(twoVersions);
    const rotating = (await client.createKey({ parentId: "wmk", rotationPeriodSeconds: 3600 })).id!;
    const destroying = (await client.createKey({ parentId: "wmk" })).id!;
    await client.createVersion(destroying);
    await client.destroyVersion(destroying, 2);
    // Destroyed as a whole and one version restored: no version is ENABLED, so nothing of it is unwrapped to
    // answer a call, yet a new version must still be refused under the wrong master key.
    const restored = (await client.createKey({ parentId: "wmk" })).id!;
    await client.destroyKey(restored);
    await client.restoreVersion(restored, 1);
    // Rotation and destruction are due from here on.
    clock.advance(HOUR_MS);

    client = await restart(KEY_B);
    const before = storeSnapshot(dir.path);
    expectServerFault(await failureOf(client.createVersion(plainId)));
    expectServerFault(await failureOf(client.createVersion(restored)));
    expectServerFault(await failureOf(client.disableVersion(twoVersions, 2)));
    expectServerFault(await failureOf(client.setPrimary(twoVersions, 2)));
    expectServerFault(await failureOf(client.updateKey(plainId, { description: "changed under B" }, ["description"])));
    expectServerFault(await failureOf(client.decrypt({ keyId: plainId, ciphertext: sealed.ciphertext })));
    await server!.app.sweeper.runOnce();
    expect(server!.logs()).toContain("key sweep failed");
    expect(storeSnapshot(dir.path)).toEqual(before);

    client = await restart(KEY_A);
    expect(text((await client.decrypt({ keyId: plainId, ciphertext: sealed.ciphertext })).plaintext)).toBe("made under A");
    expect((await client.createVersion(plainId)).id).toBe(2);
    expect((await client.getKey(plainId)).description).toBeUndefined();
    expect((await client.getVersion(twoVersions, 2)).state).toBe("ENABLED");
    expect((await client.getKey(twoVersions)).primary?.id).toBe(1);
    await client.enableVersion(restored, 1);
    expect((await client.createVersion(restored)).id).toBe(2);
    const fresh = await client.encrypt({ keyId: restored, keyVersionId: 2, plaintext: Buffer.from("new") });
    expect(text((await client.decrypt({ keyId: restored, ciphertext: fresh.ciphertext })).plaintext)).toBe("new");
    await server!.app.sweeper.runOnce();
    expect((await client.getKey(rotating)).primary?.id).toBe(2);
    expect((await client.getVersion(destroying, 2)).state).toBe("DESTROYED");
  });
});
