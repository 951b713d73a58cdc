import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodePoolService } from "../../gen/compute/cluster/v1/node_pool_pb.js";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { adminCredentials } from "../support/credentials.js";
import { adminJson, makePrincipal } from "../support/principals.js";
import type { AuditJsonLine, Principal } from "../support/principals.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { wireCall } from "../support/wire-call.js";
import type { WireAnswer } from "../support/wire-call.js";
import { CLUSTER, FLAVOR, VDC, writeTestCatalog } from "./compute-helpers.js";

// Issue 9, "Must show": the audit trail of an end-to-end scenario lists its calls in order with the right
// principals, and holds none of the scenario's secrets. The scenario: two service accounts log in, one creates a
// key, encrypts and decrypts with it, the other (an encrypter) tries to destroy it and is refused, and the first
// creates a node pool; each call on another protocol. The trail is read as an operator reads it, with
// `cloudplane-admin audit --json`, and the data directory's files (the database, its write-ahead log and
// shared-memory index, everything else there) are searched byte by byte for every secret of the scenario.

const NS = "orders";
const kms = KeyManagerService.method;


let server: TestServer;
let catalogDir: ReturnType<typeof tempDir>;
// The data directory is this file's, so that it outlives the server (the last test searches it after the stop).
let dataDir: ReturnType<typeof tempDir>;
let stopped = false;
let owner: Principal;
let encrypter: Principal;
let since: string;
let keyId: string;
let nodePoolTaskId: string;
const plaintext = Buffer.from(`plaintext-${randomBytes(16).toString("hex")}`);
const aad = Buffer.from(`aad-${randomBytes(16).toString("hex")}`);
let ciphertext: Buffer;
let answers: Record<string, WireAnswer>;

function ok(name: string, answer: WireAnswer): WireAnswer {
  if (answer.code !== 0) throw new Error(`${name}: ${answer.code} ${answer.message}`);
  return answer;
}

beforeAll(async () => {
  catalogDir = tempDir();
  dataDir = tempDir();
  server = await startServer({ dataDir: dataDir.path, env: { CATALOG_FILE: writeTestCatalog(catalogDir.path) } });
  since = new Date().toISOString();
  // Both log in over POST /public/v2/service_auth (recorded as each account's own act).
  owner = await makePrincipal(server, "orders-service", [
    ["editor", `kms-namespace:${NS}`],
    ["editor", `service-instance:${VDC}`],
  ]);
  encrypter = await makePrincipal(server, "orders-encrypter", [["encrypter", `kms-namespace:${NS}`]]);

  const created = ok("create", await wireCall(server.url, "rest", kms.createCryptoKey, { parentId: NS, name: "order-key" }, { ...owner.auth, "x-request-id": "scenario-create" }));
  keyId = (created.response as { id: string }).id;
  const encrypted = ok(
    "encrypt",
    await wireCall(server.url, "grpc", kms.encrypt, { keyId, keyVersionId: 1, plaintext, additionalAuthenticatedData: aad }, { ...owner.auth, "x-request-id": "scenario-encrypt" }),
  );
  ciphertext = Buffer.from((encrypted.response as { ciphertext: string }).ciphertext, "base64");
  const decrypted = ok(
    "decrypt",
    await wireCall(server.url, "connect-json", kms.decrypt, { keyId, ciphertext, additionalAuthenticatedData: aad }, { ...owner.auth, "x-request-id": "scenario-decrypt" }),
  );
  const refused = await wireCall(server.url, "grpc-web", kms.destroyCryptoKey, { keyId }, { ...encrypter.auth, "x-request-id": "scenario-destroy" });
  const pool = ok(
    "node pool",
    await wireCall(
      server.url,
      "connect-binary",
      NodePoolService.method.createNodePool,
      { serviceInstanceId: VDC, clusterId: CLUSTER, nodePoolName: "orders-pool", nodeConfig: { computeFlavor: FLAVOR }, scalePolicy: { fixedScale: { count: 1 } } },
      { ...owner.auth, "x-request-id": "scenario-node-pool" },
    ),
  );
  nodePoolTaskId = (pool.response as { task: { id: string } }).task.id;
  answers = { created, encrypted, decrypted, refused, pool };
});

afterAll(async () => {
  if (!stopped) await server?.stop();
  dataDir?.remove();
  catalogDir?.remove();
});

describe("the audit trail of a scenario, read with cloudplane-admin audit --json", () => {
  it("the scenario ran as it should: the encrypter's destroy was refused, the rest succeeded", () => {
    expect(Buffer.from((answers.decrypted!.response as { plaintext: string }).plaintext, "base64")).toEqual(plaintext);
    expect({ code: answers.refused!.code, reason: answers.refused!.details[0]!.reason }).toEqual({ code: 7, reason: "PERMISSION_DENIED" });
    expect(nodePoolTaskId).not.toBe("");
  });

  it("lists its calls in order, with principals, methods, protocols, scopes, resources, codes and request ids", async () => {
    const lines = await adminJson<AuditJsonLine>(server.dataDir, ["audit", "--since", since]);
    const rows = lines.map(({ at: _at, requestId, ...rest }) => ({ ...rest, requestId: requestId.startsWith("scenario-") ? requestId : "<generated>" }));
    expect(rows).toEqual([
      { principal: owner.id, method: "compute.auth.v2.AuthService/ServiceAuth", protocol: "rest", scope: "", resource: "/public/v2/service_auth", code: 0, requestId: "<generated>" },
      { principal: encrypter.id, method: "compute.auth.v2.AuthService/ServiceAuth", protocol: "rest", scope: "", resource: "/public/v2/service_auth", code: 0, requestId: "<generated>" },
      { principal: owner.id, method: "kms.v1.KeyManagerService/CreateCryptoKey", protocol: "rest", scope: `kms-namespace:${NS}`, resource: "/v1/keys", code: 0, requestId: "scenario-create" },
      { principal: owner.id, method: "kms.v1.KeyManagerService/Encrypt", protocol: "grpc", scope: `kms-namespace:${NS}`, resource: `/v1/keys/${keyId}`, code: 0, requestId: "scenario-encrypt" },
      { principal: owner.id, method: "kms.v1.KeyManagerService/Decrypt", protocol: "connect", scope: `kms-namespace:${NS}`, resource: `/v1/keys/${keyId}`, code: 0, requestId: "scenario-decrypt" },
      // Refused before any scope was looked up: the encrypter may destroy keys nowhere.
      { principal: encrypter.id, method: "kms.v1.KeyManagerService/DestroyCryptoKey", protocol: "grpc-web", scope: "", resource: `/v1/keys/${keyId}`, code: 7, requestId: "scenario-destroy" },
      {
        principal: owner.id,
        method: "compute.cluster.v1.NodePoolService/CreateNodePool",
        protocol: "connect",
        scope: `service-instance:${VDC}`,
        resource: `/cluster/v1/${VDC}/node-pools`,
        code: 0,
        requestId: "scenario-node-pool",
      },
    ]);
    // In time order, each time an ISO 8601 instant.
    const times = lines.map((l) => Date.parse(l.at));
    expect(times.every((t, i) => !Number.isNaN(t) && (i === 0 || t >= times[i - 1]!))).toBe(true);
  });

  it("filters by principal (name or id) and by resource", async () => {
    const byName = await adminJson<AuditJsonLine>(server.dataDir, ["audit", "--since", since, "--principal", "orders-encrypter"]);
    expect(byName.map((l) => [l.principal, l.method, l.code])).toEqual([
      [encrypter.id, "compute.auth.v2.AuthService/ServiceAuth", 0],
      [encrypter.id, "kms.v1.KeyManagerService/DestroyCryptoKey", 7],
    ]);
    expect(await adminJson<AuditJsonLine>(server.dataDir, ["audit", "--since", since, "--principal", encrypter.id])).toEqual(byName);
    const byScope = await adminJson<AuditJsonLine>(server.dataDir, ["audit", "--since", since, "--resource", `kms-namespace:${NS}`]);
    expect(byScope.map((l) => l.method)).toEqual(["kms.v1.KeyManagerService/CreateCryptoKey", "kms.v1.KeyManagerService/Encrypt", "kms.v1.KeyManagerService/Decrypt"]);
  });

  // An Encrypt or Decrypt names its key in the body, not in its REST path (/v1/encrypt): its record names the key
  // by the key's own path, so that a key's trail lists its every use, as Cloud KMS's data access logs do.
  it("names the key an Encrypt or Decrypt used, so that a key's trail lists them", async () => {
    const byKey = await adminJson<AuditJsonLine>(server.dataDir, ["audit", "--since", since, "--resource", `/v1/keys/${keyId}`]);
    expect(byKey.map((l) => l.method)).toEqual(["kms.v1.KeyManagerService/Encrypt", "kms.v1.KeyManagerService/Decrypt", "kms.v1.KeyManagerService/DestroyCryptoKey"]);
  });
});

describe("the scenario's secrets", () => {
  // Every secret of the scenario, in the forms it travelled in (raw bytes, base64 as JSON carries them).
  function secrets(): [string, Buffer][] {
    const list: [string, Buffer][] = [
      ["plaintext", plaintext],
      ["AAD", aad],
      ["ciphertext", ciphertext],
      // Without its format byte, key version and nonce: the AES-GCM output alone.
      ["ciphertext body", ciphertext.subarray(ciphertext.length - plaintext.length - 16)],
    ];
    for (const p of [owner, encrypter]) {
      list.push([`${p.name} client secret`, Buffer.from(p.clientSecret)]);
      list.push([`${p.name} client secret's random part`, Buffer.from(p.clientSecret.slice(p.clientSecret.lastIndexOf(".") + 1))]);
      list.push([`${p.name} token`, Buffer.from(p.token)]);
      list.push([`${p.name} token's random part`, Buffer.from(p.token.slice(p.token.lastIndexOf(".") + 1))]);
    }
    for (const [name, bytes] of [...list]) {
      if (name.endsWith("random part")) continue;
      list.push([`${name} (base64)`, Buffer.from(bytes.toString("base64"))]);
      list.push([`${name} (base64url)`, Buffer.from(bytes.toString("base64url"))]);
    }
    return list;
  }

  // Every file under the data directory, with its bytes.
  function dataFiles(dir: string): [string, Buffer][] {
    return readdirSync(dir, { recursive: true, encoding: "utf8" })
      .map((name) => join(dir, name))
      .filter((path) => statSync(path).isFile())
      .map((path) => [path, readFileSync(path)]);
  }

  function found(files: [string, Buffer][]): string[] {
    const hits: string[] = [];
    for (const [path, bytes] of files) for (const [name, secret] of secrets()) if (bytes.indexOf(secret) >= 0) hits.push(`${name} in ${path}`);
    return hits;
  }

  it("are nowhere in the data directory while the server runs: database, write-ahead log, index", () => {
    const files = dataFiles(server.dataDir);
    expect(files.map(([path]) => path.slice(server.dataDir.length + 1)).sort()).toEqual(
      expect.arrayContaining(["cloudplane.db", "cloudplane.db-wal", "admin-credentials.json"]),
    );
    // The search finds what is there: the audit trail's request ids, the key's id, and the bootstrapped admin's
    // secret in the one file meant to hold it.
    const all = Buffer.concat(files.map(([, bytes]) => bytes));
    expect(all.indexOf("scenario-encrypt")).toBeGreaterThanOrEqual(0);
    expect(all.indexOf(keyId)).toBeGreaterThanOrEqual(0);
    const adminSecret = adminCredentials(server.dataDir).client_secret;
    expect(files.filter(([, bytes]) => bytes.indexOf(adminSecret) >= 0).map(([path]) => path)).toEqual([join(server.dataDir, "admin-credentials.json")]);
    expect(found(files)).toEqual([]);
  });

  it("are not in the server's log", () => {
    const log = Buffer.from(server.logs());
    expect(secrets().filter(([, secret]) => log.indexOf(secret) >= 0).map(([name]) => name)).toEqual([]);
  });

  it("are nowhere in the data directory once the server has stopped and checkpointed its log", async () => {
    stopped = true;
    await server.stop();
    const files = dataFiles(server.dataDir);
    expect(files.map(([path]) => path.slice(server.dataDir.length + 1))).toContain("cloudplane.db");
    expect(found(files)).toEqual([]);
  });
});
