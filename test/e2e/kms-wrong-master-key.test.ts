import { afterAll, describe, expect, it } from "vitest";
import { masterKeyCheck } from "../../src/kms/master-key-check.js";
import { MasterKey } from "../../src/kms/master-key.js";
import { FakeClock } from "../support/fake-clock.js";
import { createKmsClient } from "../support/kms-clients.js";
import type { KmsClient } from "../support/kms-clients.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { storeSnapshot } from "../support/store-snapshot.js";
import { tempDir } from "../support/temp-dir.js";

// A server restarted on its data directory with another master key does not start: the check value stored with the
// data names the key it was written with (docs/master-key-check.md). Nothing runs under the wrong key, so nothing
// is written, rotated or swept; back on the right master key everything works as if the attempt had never happened.
// The same refusal through a real process (exit code, stderr, MASTER_KEY_FILE, a missing master.key, a store from
// before check values): test/e2e/master-key-startup.test.ts. What each call does if material still fails to unwrap
// (a store altered behind the server's back): test/unit/key-manager-failed-writes.test.ts.

const KEY_A = Buffer.alloc(32, 1).toString("base64");
const KEY_B = Buffer.alloc(32, 2).toString("base64");
const keyId = (base64: string) => masterKeyCheck(new MasterKey(Buffer.from(base64, "base64"))).keyId;
const HOUR_MS = 3600 * 1000;
// The sweeper runs only when the test says so, and destruction and rotation come due within the test.
const settings = { DESTROY_GRACE_SECONDS: "60", MIN_ROTATION_SECONDS: "60", SWEEP_INTERVAL_SECONDS: "86400" };

const text = (bytes: Uint8Array) => Buffer.from(bytes).toString();

describe("a server restarted with the wrong master key", () => {
  const dir = tempDir();
  const clock = new FakeClock();
  let server: TestServer | undefined;
  let kms: KmsClient | undefined;

  async function stop(): Promise<void> {
    await kms?.close();
    await server?.stop();
    kms = undefined;
    server = undefined;
  }

  async function restart(masterKey: string): Promise<KmsClient> {
    await stop();
    server = await startServer({ dataDir: dir.path, clock, env: { ...settings, MASTER_KEY: masterKey } });
    kms = createKmsClient("rest", server.url);
    return kms;
  }

  afterAll(async () => {
    await stop();
    dir.remove();
  });

  it("refuses to start, commits nothing, and the right master key finds every key as it was", async () => {
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
    // Destroyed as a whole and one version restored: no version is ENABLED.
    const restored = (await client.createKey({ parentId: "wmk" })).id!;
    await client.destroyKey(restored);
    await client.restoreVersion(restored, 1);
    await stop();
    // Rotation and destruction are due from here on: a server that started would do both at its first sweep.
    clock.advance(HOUR_MS);

    const before = storeSnapshot(dir.path);
    await expect(restart(KEY_B)).rejects.toThrow(
      `the master key from MASTER_KEY (key id ${keyId(KEY_B)}) does not match the one the data directory ${dir.path} ` +
        `was written with (key id ${keyId(KEY_A)}, from the check value stored with the data); nothing was changed`,
    );
    expect(server).toBeUndefined();
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
