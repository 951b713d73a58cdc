import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import Database from "better-sqlite3";
import { join } from "node:path";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { MasterKey } from "../../src/kms/master-key.js";
import { adminAuth, adminCredentials, fetchToken } from "../support/credentials.js";
import { adminAuthInterceptor } from "../support/kms-clients.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// With logging at debug level, a full scenario (successes and failures, gRPC and REST) leaves neither key
// material nor plaintext nor the master key nor any credential (the admin's client secret and token, rejected
// ones) in the log output.
describe("logs carry no secrets", () => {
  let server: TestServer;
  const plaintext = "PLAINTEXT-CANARY-4f1c9e";
  const aad = "AAD-CANARY-77ab01";

  beforeAll(async () => {
    server = await startServer({ env: { LOG_LEVEL: "debug" } });
  });
  afterAll(() => server.stop());

  it("logs every call at debug level without plaintext, AAD or key material", async () => {
    const client = createClient(KeyManagerService, createGrpcTransport({ baseUrl: server.url, interceptors: [adminAuthInterceptor(server.url)] }));
    const key = await client.createCryptoKey({ parentId: "logs", name: "log-key" });
    const enc = await client.encrypt({
      keyId: key.id,
      keyVersionId: 1,
      plaintext: Buffer.from(plaintext),
      additionalAuthenticatedData: Buffer.from(aad),
    });
    await client.decrypt({ keyId: key.id, ciphertext: enc.ciphertext, additionalAuthenticatedData: Buffer.from(aad) });
    await expect(client.decrypt({ keyId: key.id, ciphertext: enc.ciphertext, additionalAuthenticatedData: Buffer.from("other") })).rejects.toThrow();
    await expect(client.encrypt({ keyId: key.id, keyVersionId: 9, plaintext: Buffer.from(plaintext) })).rejects.toThrow();
    const rest = await fetch(`${server.url}/v1/encrypt`, {
      method: "POST",
      headers: { "content-type": "application/json", ...adminAuth(server.url) },
      body: JSON.stringify({ keyId: key.id, keyVersionId: 1, plaintext: Buffer.from(plaintext).toString("base64"), bogus: plaintext }),
    });
    expect(rest.status).toBe(400);
    // Credentials that fail: a token the server never issued, a wrong client secret.
    const forged = await fetch(`${server.url}/v1/encrypt`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer TOKEN-CANARY" },
      body: JSON.stringify({ keyId: key.id, keyVersionId: 1, plaintext: Buffer.from(plaintext).toString("base64") }),
    });
    expect(forged.status).toBe(401);
    const admin = adminCredentials(server.dataDir);
    await expect(fetchToken(server.url, admin.client_id, "SECRET-CANARY")).rejects.toThrow(/401/);

    const logs = server.logs();
    // The calls were logged, so the absence below means something; the admin's login among them.
    expect(logs.split("\n").filter((l) => l.includes('"msg":"call"')).length).toBeGreaterThanOrEqual(8);
    expect(logs).toContain('"method":"ServiceAuth"');

    // The key material as stored (unwrapped with the test master key) and the master key itself.
    const db = new Database(join(server.dataDir, "cloudplane.db"), { readonly: true });
    const row = db.prepare("SELECT wrapped_material FROM kms_versions WHERE key_id = ?").get(key.id) as { wrapped_material: Buffer };
    db.close();
    const master = Buffer.from(server.config.masterKey, "base64");
    const material = Buffer.from(new MasterKey(master).unwrap(row.wrapped_material, key.id, 1));
    const secrets = [
      plaintext,
      Buffer.from(plaintext).toString("base64"),
      aad,
      Buffer.from(aad).toString("base64"),
      material.toString("base64"),
      material.toString("hex"),
      master.toString("base64"),
      "TOKEN-CANARY",
      "SECRET-CANARY",
      server.token,
      // The secret part of the token alone, after its public prefix and id ("cpat.<id>.<secret>").
      server.token.slice(server.token.lastIndexOf(".") + 1),
      admin.client_secret,
      Buffer.from(enc.ciphertext).toString("base64"),
    ];
    for (const secret of secrets) expect(logs).not.toContain(secret);
  });
});
