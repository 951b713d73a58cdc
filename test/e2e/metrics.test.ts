import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKmsClient, failureOf, restRequest } from "../support/kms-clients.js";
import { makePrincipal } from "../support/principals.js";
import { startServer } from "../support/server.js";
import { storeSnapshot } from "../support/store-snapshot.js";
import type { TestServer } from "../support/server.js";

// Issue 13, "Must show": GET /metrics after a scenario shows the calls it made, by service, method, protocol and
// code, whatever protocol carried them; its access follows the METRICS setting.

const SI = "6f1c2a4e-3b7d-4e59-9a0c-8d2f1e3b5a71";
const CL = "b3e8d0f2-7c41-4a95-8e26-0f9d3c1a7b54";
const KMS = 'service="kms.v1.KeyManagerService"';

async function scrape(server: TestServer, authorization = `Bearer ${server.token}`): Promise<Response> {
  return fetch(`${server.url}/metrics`, { headers: authorization === "" ? {} : { authorization } });
}

// The value of one sample line, matched by its name and every label given (in the order the registry writes
// them); undefined when there is no such line.
function sample(text: string, name: string, labels: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}}`) || l.startsWith(`${name}{${labels},`));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}

describe("GET /metrics", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startServer({ env: { PROVIDER_DELAY_MS: "0" } });
  });
  afterAll(async () => {
    await server.stop();
  });

  it("counts the calls of a scenario by service, method, protocol and code, with durations, cache hits and the task queue", async () => {
    const grpc = createKmsClient("grpc", server.url);
    const connect = createKmsClient("connect-json", server.url);
    const grpcWeb = createKmsClient("grpc-web", server.url);
    try {
      const key = await grpc.createKey({ parentId: "metrics", name: "m1" });
      const keyId = key.id!;
      for (let i = 0; i < 3; i++) await grpc.encrypt({ keyId: keyId, keyVersionId: 1, plaintext: new Uint8Array([1, 2, 3]) });
      await connect.encrypt({ keyId: keyId, keyVersionId: 1, plaintext: new Uint8Array([4]) });
      await grpcWeb.getKey(keyId);
      // Two failures: disabling the primary (FAILED_PRECONDITION) over REST, an unknown key over Connect.
      const refused = await restRequest(server.url, "POST", `/v1/keys/${keyId}/versions/1/disable`, { body: {} });
      expect(refused.status).toBe(400);
      expect((await failureOf(connect.getKey("no-such-key"))).code).toBe(5);
      // No credentials: refused by the authentication stage, and counted all the same.
      const anonymous = await restRequest(server.url, "GET", `/v1/keys/${keyId}`, { headers: { authorization: "" } });
      expect(anonymous.status).toBe(401);
      // A node pool task, over REST.
      const created = await restRequest(server.url, "POST", `/cluster/v1/${SI}/node-pools`, {
        body: { clusterId: CL, nodePoolName: "metrics-pool", nodeConfig: { computeFlavor: "cpu.4C.16G" }, scalePolicy: { fixedScale: { count: 1 } } },
      });
      expect(created.status).toBe(200);
      const taskId = (created.json as { task: { id: string } }).task.id;
      const waited = await restRequest(server.url, "POST", `/cluster/v1/${SI}/tasks/${taskId}:wait`, { body: { timeout: "30s" } });
      expect((waited.json as { task: { status: string } }).task.status).toBe("SUCCEEDED");
    } finally {
      await Promise.all([grpc.close(), connect.close(), grpcWeb.close()]);
    }

    const res = await scrape(server);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const text = await res.text();
    const calls = (labels: string): number | undefined => sample(text, "cloudplane_calls_total", labels);
    expect(calls(`${KMS},method="CreateCryptoKey",protocol="grpc",code="OK"`)).toBe(1);
    expect(calls(`${KMS},method="Encrypt",protocol="grpc",code="OK"`)).toBe(3);
    expect(calls(`${KMS},method="Encrypt",protocol="connect",code="OK"`)).toBe(1);
    expect(calls(`${KMS},method="GetCryptoKey",protocol="grpc-web",code="OK"`)).toBe(1);
    expect(calls(`${KMS},method="DisableCryptoKeyVersion",protocol="rest",code="FAILED_PRECONDITION"`)).toBe(1);
    expect(calls(`${KMS},method="GetCryptoKey",protocol="connect",code="NOT_FOUND"`)).toBe(1);
    expect(calls(`${KMS},method="GetCryptoKey",protocol="rest",code="UNAUTHENTICATED"`)).toBe(1);
    expect(calls(`service="compute.cluster.v1.NodePoolService",method="CreateNodePool",protocol="rest",code="OK"`)).toBe(1);
    expect(calls(`service="compute.cluster.v1.TaskService",method="WaitTask",protocol="rest",code="OK"`)).toBe(1);
    // The histogram: 3 gRPC Encrypts, each in some bucket and all below +Inf.
    const encrypt = `${KMS},method="Encrypt",protocol="grpc"`;
    expect(sample(text, "cloudplane_call_duration_seconds_count", encrypt)).toBe(3);
    expect(sample(text, "cloudplane_call_duration_seconds_bucket", `${encrypt},le="+Inf"`)).toBe(3);
    expect(sample(text, "cloudplane_call_duration_seconds_bucket", `${encrypt},le="60"`)).toBe(3);
    expect(sample(text, "cloudplane_call_duration_seconds_sum", encrypt)).toBeGreaterThan(0);
    expect(text).toContain("# TYPE cloudplane_call_duration_seconds histogram");
    // Four Encrypts and one read of the key found it in the cache.
    expect(sample(text, "cloudplane_key_cache_hits_total", "")).toBeUndefined();
    expect(Number(/^cloudplane_key_cache_hits_total (\d+)$/m.exec(text)?.[1])).toBeGreaterThanOrEqual(5);
    expect(sample(text, "cloudplane_task_queue_depth", 'status="PENDING"')).toBe(0);
    expect(sample(text, "cloudplane_task_queue_depth", 'status="RUNNING"')).toBe(0);
    expect(sample(text, "cloudplane_task_queue_oldest_age_seconds", 'status="PENDING"')).toBe(0);
    // Node's own, from prom-client.
    expect(text).toMatch(/^process_cpu_seconds_total \d/m);
  });

  it("shows an unfinished task in the task queue, with its age", async () => {
    const slow = await startServer({ env: { PROVIDER_DELAY_MS: "3000" } });
    try {
      const created = await restRequest(slow.url, "POST", `/cluster/v1/${SI}/node-pools`, {
        body: { clusterId: CL, nodePoolName: "queued-pool", nodeConfig: { computeFlavor: "cpu.4C.16G" }, scalePolicy: { fixedScale: { count: 1 } } },
      });
      expect(created.status).toBe(200);
      await new Promise((r) => setTimeout(r, 200));
      const text = await (await scrape(slow)).text();
      const pending = sample(text, "cloudplane_task_queue_depth", 'status="PENDING"')!;
      const running = sample(text, "cloudplane_task_queue_depth", 'status="RUNNING"')!;
      expect(pending + running).toBe(1);
      const age = sample(text, "cloudplane_task_queue_oldest_age_seconds", `status="${running === 1 ? "RUNNING" : "PENDING"}"`)!;
      expect(age).toBeGreaterThan(0.1);
      expect(age).toBeLessThan(30);
    } finally {
      await slow.stop();
    }
  });

  it("counts RESOURCE_EXHAUSTED refusals by their reason", async () => {
    const other = await startServer({ env: { AUTH_FAILURES_PER_MINUTE: "1" } });
    try {
      // Two bad tokens from one address: the second is refused as too many failures.
      for (let i = 0; i < 2; i++) await restRequest(other.url, "GET", "/v1/keys?parentId=x", { headers: { authorization: "Bearer cpat.nope.nope" } });
      const text = await (await scrape(other)).text();
      const labels = `${KMS},method="ListCryptoKeys",protocol="rest"`;
      expect(sample(text, "cloudplane_calls_total", `${labels},code="UNAUTHENTICATED"`)).toBe(1);
      expect(sample(text, "cloudplane_calls_total", `${labels},code="RESOURCE_EXHAUSTED"`)).toBe(1);
      expect(sample(text, "cloudplane_resource_exhausted_total", `${labels},reason="AUTHENTICATION_RATE_LIMITED"`)).toBe(1);
    } finally {
      await other.stop();
    }
  });

  it("answers only the admin on '*' by default: 401 without a token, 403 for anyone else, and changes nothing", async () => {
    const viewer = await makePrincipal(server, "metrics-viewer", [["viewer", "*"]]);
    const before = storeSnapshot(server.dataDir);
    const none = await scrape(server, "");
    expect(none.status).toBe(401);
    // RFC 9110 15.5.2: a 401 carries its challenge.
    expect(none.headers.get("www-authenticate")).toBe('Bearer realm="cloudplane"');
    const body = (await none.json()) as { code: number; message: string };
    expect(body.code).toBe(16);
    expect(body.message).toContain("no credentials");
    const bad = await scrape(server, "Bearer cpat.not.valid");
    expect(bad.status).toBe(401);
    expect(((await bad.json()) as { message: string }).message).toContain("the access token in Authorization");
    const denied = await scrape(server, viewer.auth.authorization);
    expect(denied.status).toBe(403);
    expect(((await denied.json()) as { message: string }).message).toBe(
      `principal ${viewer.id} may not read /metrics: it needs the admin role on scope "*" (or METRICS=open)`,
    );
    const after = storeSnapshot(server.dataDir);
    delete before["compute_workers"];
    delete after["compute_workers"];
    expect(after).toEqual(before);
  });

  it("METRICS=open answers anyone; METRICS=off keeps no metrics and serves none", async () => {
    const open = await startServer({ env: { METRICS: "open" } });
    const off = await startServer({ env: { METRICS: "off" } });
    try {
      const res = await scrape(open, "");
      expect(res.status).toBe(200);
      expect(await res.text()).toContain("# TYPE cloudplane_calls_total counter");
      const gone = await scrape(off);
      expect(gone.status).toBe(404);
    } finally {
      await Promise.all([open.stop(), off.stop()]);
    }
  });
});
