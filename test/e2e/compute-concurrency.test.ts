import { join } from "node:path";
import Database from "better-sqlite3";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodePool_State, NodePoolService, NodePoolTaskMetadataSchema } from "../../gen/compute/cluster/v1/node_pool_pb.js";
import { Task_Status, TaskService } from "../../gen/compute/cluster/v1/task_pb.js";
import type { Task } from "../../gen/compute/cluster/v1/task_pb.js";
import { QuotaFailureSchema } from "../../gen/google/rpc/error_details_pb.js";
import { adminAuthInterceptor } from "../support/kms-clients.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { auditRecords } from "../support/store-snapshot.js";
import { CLUSTER, FLAVOR, VDC, testCatalog, writeTestCatalog } from "./compute-helpers.js";

const CREATES = 200;
const capacity = testCatalog.serviceInstances[0]!.clusters[0]!.capacity;

// 200 CreateNodePool calls at once on one cluster whose capacity fits only a few of them.
describe("concurrent node pool creation", () => {
  let server: TestServer;
  let catalogDir: ReturnType<typeof tempDir>;

  beforeAll(async () => {
    catalogDir = tempDir();
    server = await startServer({ env: { CATALOG_FILE: writeTestCatalog(catalogDir.path), PROVIDER_DELAY_MS: "0" } });
  });

  afterAll(async () => {
    await server.stop();
    catalogDir.remove();
  });

  it("ends every accepted pool RUNNING or its task FAILED with QuotaFailure, within capacity, each task run once", { timeout: 120_000 }, async () => {
    const transport = createConnectTransport({ baseUrl: server.url, httpVersion: "2", interceptors: [adminAuthInterceptor(server.url)] });
    const pools = createClient(NodePoolService, transport);
    const tasks = createClient(TaskService, transport);

    const outcomes = await Promise.all(
      Array.from({ length: CREATES }, (_, i) =>
        pools
          .createNodePool({
            serviceInstanceId: VDC,
            clusterId: CLUSTER,
            nodeConfig: { computeFlavor: FLAVOR },
            nodePoolName: `pool-${i}`,
            scalePolicy: { fixedScale: { count: 1 + (i % 3) } },
          })
          .then(
            (res) => res.task,
            (err: unknown) => ConnectError.from(err),
          ),
      ),
    );
    // A call may be turned away by a rate limit; nothing else may fail.
    for (const o of outcomes) if (o instanceof ConnectError) expect(o.code).toBe(Code.ResourceExhausted);
    const accepted = outcomes.filter((o): o is Task => o !== undefined && !(o instanceof ConnectError));
    expect(accepted.length).toBeGreaterThan(0);

    const done = await Promise.all(
      accepted.map(async (t) => (await tasks.waitTask({ serviceInstanceId: VDC, taskId: t.id, timeout: { seconds: 60n } })).task!),
    );
    const { nodePools } = await pools.listNodePools({ serviceInstanceId: VDC, clusterId: CLUSTER });
    const byId = new Map(nodePools.map((p) => [p.nodePoolId, p]));
    let used = 0;
    for (const task of done) {
      const nodePoolId = anyUnpack(task.metadata!, NodePoolTaskMetadataSchema)!.nodePoolId;
      const pool = byId.get(nodePoolId);
      if (task.status === Task_Status.SUCCEEDED) {
        expect(pool?.state).toBe(NodePool_State.RUNNING);
        used += pool?.scalePolicy?.fixedScale?.count ?? 0;
      } else {
        expect(task.status).toBe(Task_Status.FAILED);
        expect(task.error?.code).toBe(Code.ResourceExhausted);
        expect(anyUnpack(task.error!.details[1]!, QuotaFailureSchema)?.violations[0]?.subject).toBe(`clusters/${CLUSTER}`);
        expect(pool?.state).toBe(NodePool_State.ERROR);
      }
    }
    expect(used).toBeLessThanOrEqual(capacity);
    expect(nodePools).toHaveLength(accepted.length);

    // No task lost, none run twice: every accepted task is stored once, finished, and was taken by a worker once.
    const listed = await tasks.listTasks({ serviceInstanceId: VDC, page: { limit: 1000 } });
    expect(new Set(listed.tasks.map((t) => t.id))).toEqual(new Set(accepted.map((t) => t.id)));
    const db = new Database(join(server.dataDir, "cloudplane.db"), { readonly: true });
    try {
      const rows = db.prepare("SELECT status, attempts FROM compute_tasks").all() as { status: string; attempts: number }[];
      expect(rows).toHaveLength(accepted.length);
      expect(rows.every((r) => r.attempts === 1 && (r.status === "SUCCEEDED" || r.status === "FAILED"))).toBe(true);
      const reserved = db.prepare("SELECT COALESCE(SUM(reserved), 0) FROM compute_simulated_nodes WHERE cluster_id = ?").pluck().get(CLUSTER);
      expect(reserved).toBe(used);
      // Every create, accepted or not, is in the audit trail once, as the admin's.
      const audited = auditRecords(server.dataDir).filter((r) => r.method === "compute.cluster.v1.NodePoolService/CreateNodePool");
      expect(audited).toHaveLength(CREATES);
      expect(new Set(audited.map((r) => r.request_id)).size).toBe(CREATES);
      expect(audited.every((r) => r.principal === server.adminId)).toBe(true);
    } finally {
      db.close();
    }
  });
});
