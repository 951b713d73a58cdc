import { afterAll, describe, expect, it } from "vitest";
import { spawnServer } from "../support/server.js";
import type { SpawnedServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";

async function call(server: SpawnedServer, method: string, path: string, body?: unknown, token = server.token): Promise<Record<string, unknown>> {
  const res = await fetch(server.url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

// An acknowledged write survives kill -9: keys, versions and state changes made before the kill are all there
// after a restart on the same data directory, and every ciphertext made before it still decrypts.
describe("durability across SIGKILL", () => {
  const dir = tempDir();
  let server: SpawnedServer | undefined;

  afterAll(async () => {
    await server?.kill("SIGKILL");
    dir.remove();
  });

  it("decrypts every ciphertext made before the kill", async () => {
    // The master key is generated into the data directory on first start and must be found again.
    const env = { MASTER_KEY: "" };
    server = await spawnServer({ dataDir: dir.path, env });
    const made: { keyId: string; ciphertext: string; plaintext: string; aad: string }[] = [];
    const disabled: { keyId: string; ciphertext: string }[] = [];
    for (let k = 0; k < 5; k++) {
      const key = await call(server, "POST", "/v1/keys", { parentId: "durable", name: `key-${k}`, defaultAlgorithm: ["AES_128", "AES_192", "AES_256"][k % 3] });
      const keyId = key.id as string;
      await call(server, "POST", `/v1/keys/${keyId}/versions`, {});
      await call(server, "POST", `/v1/keys/${keyId}/versions`, { algorithm: "AES_128" });
      await call(server, "PATCH", `/v1/keys/${keyId}/versions/3/primary`, {});
      for (const version of [1, 2, 3]) {
        for (let i = 0; i < 4; i++) {
          const plaintext = Buffer.from(`message ${k}/${version}/${i}`).toString("base64");
          const aad = Buffer.from(`aad ${i}`).toString("base64");
          const enc = await call(server, "POST", "/v1/encrypt", { keyId, keyVersionId: version, plaintext, additionalAuthenticatedData: aad });
          made.push({ keyId, ciphertext: enc.ciphertext as string, plaintext, aad });
        }
      }
      // A state change is a write too: the disabled version must still be disabled after the restart.
      const enc = await call(server, "POST", "/v1/encrypt", { keyId, keyVersionId: 2, plaintext: "ZGlzYWJsZWQ=" });
      await call(server, "POST", `/v1/keys/${keyId}/versions/2/disable`, {});
      disabled.push({ keyId, ciphertext: enc.ciphertext as string });
    }

    const tokenBeforeKill = server.token;
    await server.kill("SIGKILL");
    server = await spawnServer({ dataDir: dir.path, env });
    // The admin logs in again from its credentials file, and the token issued before the kill is still good.
    await call(server, "GET", "/v1/keys?parentId=durable", undefined, tokenBeforeKill);

    for (const d of disabled) {
      const res = await fetch(`${server.url}/v1/decrypt`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${server.token}` },
        body: JSON.stringify(d),
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { message: string }).message).toBe(
        `key version 2 of key ${d.keyId} is not enabled, current state is: DISABLED`,
      );
      await call(server, "POST", `/v1/keys/${d.keyId}/versions/2/enable`, {});
    }
    for (const m of made) {
      const dec = await call(server, "POST", "/v1/decrypt", { keyId: m.keyId, ciphertext: m.ciphertext, additionalAuthenticatedData: m.aad });
      expect(dec.plaintext).toBe(m.plaintext);
    }
    const listed = await call(server, "GET", "/v1/keys?parentId=durable");
    expect((listed.keys as { name: string; primary: { id: number } }[]).map((k) => [k.name, k.primary.id])).toEqual(
      [0, 1, 2, 3, 4].map((k) => [`key-${k}`, 3]),
    );
  });
});
