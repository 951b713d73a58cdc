import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeClock } from "../support/fake-clock.js";
import { createKmsClient } from "../support/kms-clients.js";
import type { KmsClient } from "../support/kms-clients.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";

// GetCryptoKey, GetCryptoKeyVersion and ListCryptoKeyVersions answer from the server's key cache
// (src/kms/key-cache.ts). Over gRPC (the direct adapter) and REST, every read after a mutation shows it, the
// sweeper's included; and at the end a server started afresh on the same data, which reads the store, answers
// exactly the same.

const SECOND = 1000;
const HOUR = 3600 * SECOND;
const env = { DESTROY_GRACE_SECONDS: "3600", MIN_ROTATION_SECONDS: "60", SWEEP_INTERVAL_SECONDS: "86400" };

describe("key reads from the cache, after every mutation", () => {
  const clock = new FakeClock();
  const dir = tempDir();
  let server: TestServer;
  let grpc: KmsClient;
  let rest: KmsClient;
  let keyId = "";

  // What every read says about the key, over gRPC; REST must say the same.
  async function reads(over: KmsClient = grpc) {
    return { key: await over.getKey(keyId), versions: await over.listVersions(keyId), v1: await over.getVersion(keyId, 1) };
  }

  async function readsAgree() {
    const viaGrpc = await reads();
    expect(await reads(rest)).toEqual(viaGrpc);
    return viaGrpc;
  }

  beforeAll(async () => {
    server = await startServer({ clock, env, dataDir: dir.path });
    grpc = createKmsClient("grpc", server.url);
    rest = createKmsClient("rest", server.url);
  });

  afterAll(async () => {
    await grpc?.close();
    await rest?.close();
    await server?.stop();
    dir.remove();
  });

  it("follows updates, new versions, primary and state changes, rotation and destruction", async () => {
    const created = await grpc.createKey({ parentId: "cache", name: "cached", rotationPeriodSeconds: 2 * 3600 });
    keyId = created.id ?? "";
    expect((await readsAgree()).key).toEqual(created);

    await rest.updateKey(keyId, { description: "updated", labels: ["a"] }, ["description", "labels"]);
    expect((await readsAgree()).key).toMatchObject({ description: "updated", labels: ["a"] });

    await grpc.createVersion(keyId, "AES_128");
    await grpc.setPrimary(keyId, 2);
    expect((await readsAgree()).key.primary).toMatchObject({ id: 2, algorithm: "AES_128" });

    await rest.disableVersion(keyId, 1);
    expect((await readsAgree()).v1.state).toBe("DISABLED");
    await grpc.destroyVersion(keyId, 1);
    expect((await readsAgree()).v1.state).toBe("DESTROYED_SCHEDULED");

    // Destruction and rotation both come due; the sweeper carries them out.
    clock.advance(2 * HOUR);
    await server.app.sweeper.runOnce();
    const after = await readsAgree();
    expect(after.v1.state).toBe("DESTROYED");
    expect(after.key.primary?.id).toBe(3);
    expect(after.versions.map((v) => [v.id, v.state])).toEqual([
      [1, "DESTROYED"],
      [2, "ENABLED"],
      [3, "ENABLED"],
    ]);

    await grpc.destroyKey(keyId);
    expect((await readsAgree()).versions.map((v) => v.state)).toEqual(["DESTROYED", "DESTROYED_SCHEDULED", "DESTROYED_SCHEDULED"]);
    const last = await reads();

    await grpc.close();
    await rest.close();
    await server.stop();
    server = await startServer({ clock, env, dataDir: dir.path });
    grpc = createKmsClient("grpc", server.url);
    rest = createKmsClient("rest", server.url);
    expect(await readsAgree()).toEqual(last);
  });
});
