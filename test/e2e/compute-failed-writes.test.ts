import type { JsonObject } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeClock } from "../support/fake-clock.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { AUDIT_TABLE, auditRecords, storeSnapshot } from "../support/store-snapshot.js";
import { tempDir } from "../support/temp-dir.js";
import { injectWriteFailure } from "../support/write-failure.js";
import { CLUSTER, FLAVOR, ROOMY_CLUSTER, VDC, rest, restDetails, restNodePoolId, writeTestCatalog } from "./compute-helpers.js";
import type { RestResponse } from "./compute-helpers.js";

// Every node pool change that can fail after the request itself was found valid (a name taken in the cluster, a
// task still running, a limit of the cluster, storage failing halfway through the write) answers its exact code
// and leaves every row of the store as it was: no pool, no task, no changed state; only the audit trail records
// the refusal, as it records every mutation.

let server: TestServer;
let catalogDir: ReturnType<typeof tempDir>;
// Two finished pools of CLUSTER, and one of ROOMY_CLUSTER whose create task is still bringing up its node.
let taken: string;
let idle: string;
let busy: string;

const poolsPath = `/cluster/v1/${VDC}/node-pools`;

async function createPool(clusterId: string, nodePoolName: string, count: number): Promise<JsonObject> {
  const body = { clusterId, nodeConfig: { computeFlavor: FLAVOR }, nodePoolName, scalePolicy: { fixedScale: { count } } };
  const res = await rest(server.url, "POST", poolsPath, body);
  expect(res.status).toBe(200);
  return res.json.task as JsonObject;
}

beforeAll(async () => {
  catalogDir = tempDir();
  // A clock that stands still writes no heartbeats after the first, and each node takes ten minutes: once the busy
  // pool's node is reserved, nothing in the background writes, so two snapshots differ only by what a call wrote.
  server = await startServer({ clock: new FakeClock(), env: { CATALOG_FILE: writeTestCatalog(catalogDir.path), PROVIDER_DELAY_MS: "600000" } });
  for (const name of ["taken", "idle"]) {
    // Pools of 0 nodes are ready at once.
    const task = await createPool(CLUSTER, name, 0);
    const done = await rest(server.url, "POST", `/cluster/v1/${VDC}/tasks/${String(task.id)}:wait`, { timeout: "10s" });
    expect((done.json.task as JsonObject).status).toBe("SUCCEEDED");
    if (name === "taken") taken = restNodePoolId(task);
    else idle = restNodePoolId(task);
  }
  busy = restNodePoolId(await createPool(ROOMY_CLUSTER, "busy", 1));
  for (let waited = 0; !storeSnapshot(server.dataDir).compute_simulated_nodes?.length; waited += 10) {
    if (waited > 10_000) throw new Error("the busy pool's node was never reserved");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
});

afterAll(async () => {
  await server.stop();
  catalogDir.remove();
});

// Sends a request that must fail, checks that the store is exactly as before it but for the audit record of the
// refusal (the admin's, with the code answered), and returns the code and reason.
async function failsCommittingNothing(method: string, path: string, body?: JsonObject): Promise<{ code: number; reason: string; res: RestResponse }> {
  const before = storeSnapshot(server.dataDir, { except: [AUDIT_TABLE] });
  const recorded = auditRecords(server.dataDir).length;
  const res = await rest(server.url, method, path, body);
  expect(storeSnapshot(server.dataDir, { except: [AUDIT_TABLE] })).toEqual(before);
  expect(res.status).not.toBe(200);
  const code = Number(res.json.code);
  expect(auditRecords(server.dataDir).slice(recorded)).toEqual([expect.objectContaining({ principal: server.adminId, code })]);
  const info = restDetails(res.json).find((d) => d["@type"] === "type.googleapis.com/google.rpc.ErrorInfo");
  return { code, reason: String(info?.reason ?? ""), res };
}

const createBody = (nodePoolName: string, clusterId = CLUSTER): JsonObject => ({
  clusterId,
  nodeConfig: { computeFlavor: FLAVOR },
  nodePoolName,
  scalePolicy: { fixedScale: { count: 1 } },
});

describe("a node pool change refused by a rule on the stored state", () => {
  it("CreateNodePool with a name taken in the cluster: ALREADY_EXISTS", async () => {
    const { code, reason } = await failsCommittingNothing("POST", poolsPath, createBody("taken"));
    expect([code, reason]).toEqual([6, "NODE_POOL_NAME_TAKEN"]);
  });

  it("UpdateNodePool renaming to a name taken in the cluster: ALREADY_EXISTS", async () => {
    const { code, reason } = await failsCommittingNothing("PATCH", `${poolsPath}/${idle}`, { nodePoolName: "taken" });
    expect([code, reason]).toEqual([6, "NODE_POOL_NAME_TAKEN"]);
  });

  it("UpdateNodePool and DeleteNodePool while the pool's task is unfinished: FAILED_PRECONDITION", async () => {
    let failure = await failsCommittingNothing("PATCH", `${poolsPath}/${busy}`, { scalePolicy: { fixedScale: { count: 2 } } });
    expect([failure.code, failure.reason]).toEqual([9, "NODE_POOL_TASK_IN_PROGRESS"]);
    failure = await failsCommittingNothing("DELETE", `${poolsPath}/${busy}`);
    expect([failure.code, failure.reason]).toEqual([9, "NODE_POOL_TASK_IN_PROGRESS"]);
  });

  it("UpdateNodePool above the cluster's pool size: INVALID_ARGUMENT", async () => {
    const { code, reason } = await failsCommittingNothing("PATCH", `${poolsPath}/${taken}`, { scalePolicy: { fixedScale: { count: 21 } } });
    expect([code, reason]).toEqual([3, "REQUEST_INVALID"]);
  });

  it("a change of a pool or cluster that does not exist: NOT_FOUND", async () => {
    const unknown = "00000000-0000-4000-8000-000000000000";
    let failure = await failsCommittingNothing("POST", poolsPath, createBody("orphan", "no-such-cluster"));
    expect([failure.code, failure.reason]).toEqual([5, "CLUSTER_NOT_FOUND"]);
    failure = await failsCommittingNothing("PATCH", `${poolsPath}/${unknown}`, { nodePoolName: "other-name" });
    expect([failure.code, failure.reason]).toEqual([5, "NODE_POOL_NOT_FOUND"]);
    failure = await failsCommittingNothing("DELETE", `${poolsPath}/${unknown}`);
    expect([failure.code, failure.reason]).toEqual([5, "NODE_POOL_NOT_FOUND"]);
  });
});

describe("a node pool change whose write fails in storage halfway through", () => {
  it("answers INTERNAL without the cause and commits nothing; the same change works once storage does", async () => {
    // The pool row is written before its task, so failing the task row fails after a first write.
    const heal = injectWriteFailure(server.dataDir, "compute_tasks", "INSERT");
    const requests: [string, string, JsonObject?][] = [
      ["POST", poolsPath, createBody("never")],
      ["PATCH", `${poolsPath}/${idle}`, { nodePoolName: "renamed", scalePolicy: { fixedScale: { count: 1 } } }],
      ["DELETE", `${poolsPath}/${idle}`],
    ];
    for (const [method, path, body] of requests) {
      const { code, res } = await failsCommittingNothing(method, path, body);
      expect([code, res.status]).toEqual([13, 500]);
      expect(String(res.json.message)).not.toMatch(/injected|sqlite|trigger/i);
    }
    heal();
    const renamed = await rest(server.url, "PATCH", `${poolsPath}/${idle}`, { nodePoolName: "renamed" });
    expect(renamed.status).toBe(200);
  });
});
