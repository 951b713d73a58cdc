import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodePoolService } from "../../gen/compute/cluster/v1/node_pool_pb.js";
import { TaskService } from "../../gen/compute/cluster/v1/task_pb.js";
import { makePrincipal } from "../support/principals.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { wireCall, wireProtocols } from "../support/wire-call.js";
import { CLUSTER, FLAVOR, VDC, writeTestCatalog } from "./compute-helpers.js";

// A revocation holds for every new call within a second (docs/access.md), but a WaitTask already waiting got the
// finished task, its result included, seconds after its token was revoked (a probe, 2026-11-28). A call that waits
// by design is held to its credentials as they are once its answer is ready.

const catalogDir = tempDir();
let server: TestServer;

beforeAll(async () => {
  // Two nodes of 700 ms each: a task runs for about a second and a half (five of them fill the cluster's 10).
  server = await startServer({ env: { CATALOG_FILE: writeTestCatalog(catalogDir.path), PROVIDER_DELAY_MS: "700" } });
});
afterAll(async () => {
  await server?.stop();
  catalogDir.remove();
});

describe.each(wireProtocols.map((protocol, i) => [protocol, i] as const))("over %s", (protocol, i) => {
  it("a WaitTask whose token is revoked while it waits is answered UNAUTHENTICATED, not with the task", async () => {
    const waiter = await makePrincipal(server, `waiter-${protocol}`, [["editor", `service-instance:${VDC}`]]);
    const created = await wireCall(
      server.url,
      protocol,
      NodePoolService.method.createNodePool,
      { serviceInstanceId: VDC, clusterId: CLUSTER, nodePoolName: `waited-${i}`, nodeConfig: { computeFlavor: FLAVOR }, scalePolicy: { fixedScale: { count: 2 } } },
      waiter.auth,
    );
    expect(created.code).toBe(0);
    const taskId = (created.response as { task: { id: string } }).task.id;
    const waiting = wireCall(server.url, protocol, TaskService.method.waitTask, { serviceInstanceId: VDC, taskId, timeout: { seconds: 30n } }, waiter.auth);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await server.app.identity.revokeTokens(waiter.name)).toBe(1);
    const answer = await waiting;
    expect(answer.code).toBe(16);
    expect(answer.response).toBeUndefined();
    // Another caller's wait on the same task gets it.
    const admin = await wireCall(server.url, protocol, TaskService.method.waitTask, { serviceInstanceId: VDC, taskId, timeout: { seconds: 30n } }, { authorization: `Bearer ${server.token}` });
    expect(admin.code).toBe(0);
    expect(admin.response).toMatchObject({ task: { id: taskId, status: "SUCCEEDED" } });
  }, 20_000);
});
