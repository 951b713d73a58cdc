import type { JsonObject } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { CLUSTER, ComputeGrpcClient, FLAVOR, OTHER_VDC, ROOMY_CLUSTER, VDC, rest, restDetails, restNodePoolId, unpack, writeTestCatalog } from "./compute-helpers.js";
import type { GrpcTask } from "./compute-helpers.js";

// Every refused request names its code, reason and (for INVALID_ARGUMENT) the field, on REST and on gRPC alike,
// and leaves no pool and no task behind.

let server: TestServer;
let catalogDir: ReturnType<typeof tempDir>;
let grpc: ComputeGrpcClient;
// Two pools of one cluster (the name of the second is taken for the first), and a pool with a task that runs
// for seconds.
let taken: string;
let busy: string;

const createBody = (over: JsonObject = {}): JsonObject => ({
  clusterId: CLUSTER,
  nodeConfig: { computeFlavor: FLAVOR },
  nodePoolName: "fresh-pool",
  scalePolicy: { fixedScale: { count: 1 } },
  ...over,
});

async function counts(): Promise<{ pools: number; tasks: number }> {
  let pools = 0;
  for (const clusterId of [CLUSTER, ROOMY_CLUSTER]) {
    const listed = await rest(server.url, "GET", `/cluster/v1/${VDC}/node-pools?clusterId=${clusterId}`);
    pools += (listed.json.nodePools as JsonObject[] | undefined)?.length ?? 0;
  }
  const tasks = await rest(server.url, "GET", `/cluster/v1/${VDC}/tasks?page.limit=1000`);
  return { pools, tasks: (tasks.json.tasks as JsonObject[] | undefined)?.length ?? 0 };
}

beforeAll(async () => {
  catalogDir = tempDir();
  // Slow nodes keep the busy pool's task running through the whole table; pools of 0 nodes are ready at once.
  server = await startServer({ env: { CATALOG_FILE: writeTestCatalog(catalogDir.path), PROVIDER_DELAY_MS: "3000" } });
  grpc = new ComputeGrpcClient(server.port);
  for (const nodePoolName of ["taken-name", "second-name"]) {
    const task = (await rest(server.url, "POST", `/cluster/v1/${VDC}/node-pools`, createBody({ nodePoolName, scalePolicy: {} }))).json.task as JsonObject;
    await rest(server.url, "POST", `/cluster/v1/${VDC}/tasks/${String(task.id)}:wait`, { timeout: "10s" });
    if (nodePoolName === "taken-name") taken = restNodePoolId(task);
  }
  const busyTask = (
    await grpc.call<{ task: GrpcTask }>("NodePoolService", "CreateNodePool", {
      serviceInstanceId: VDC,
      clusterId: ROOMY_CLUSTER,
      nodeConfig: { computeFlavor: FLAVOR },
      nodePoolName: "busy-pool",
      scalePolicy: { fixedScale: { count: 8 } },
    })
  ).task;
  busy = String(unpack(busyTask.metadata).nodePoolId);
});

afterAll(async () => {
  grpc.close();
  await server.stop();
  catalogDir.remove();
});

interface Row {
  name: string;
  // The same request on both surfaces: the REST method and path with its body, the gRPC method with its message.
  rest?: { method: string; path: () => string; body?: JsonObject };
  grpc?: { method: string; request: () => object };
  code: number;
  http: number;
  reason: string;
  // For INVALID_ARGUMENT: the one field violation.
  field?: string;
}

const createRest = (body: JsonObject) => ({ method: "POST", path: () => `/cluster/v1/${VDC}/node-pools`, body });
const createGrpc = (body: JsonObject, serviceInstanceId = VDC) => ({ method: "CreateNodePool", request: () => ({ serviceInstanceId, ...body }) });
const both = (over: JsonObject) => ({ rest: createRest(createBody(over)), grpc: createGrpc(createBody(over)) });

const rows: Row[] = [
  { name: "name ab", ...both({ nodePoolName: "ab" }), code: 3, http: 400, reason: "REQUEST_INVALID", field: "nodePoolName" },
  { name: "name of 21 characters", ...both({ nodePoolName: "a".repeat(21) }), code: 3, http: 400, reason: "REQUEST_INVALID", field: "nodePoolName" },
  { name: "name Upper", ...both({ nodePoolName: "Upper" }), code: 3, http: 400, reason: "REQUEST_INVALID", field: "nodePoolName" },
  { name: "name under_score", ...both({ nodePoolName: "under_score" }), code: 3, http: 400, reason: "REQUEST_INVALID", field: "nodePoolName" },
  { name: "duplicate name", ...both({ nodePoolName: "taken-name" }), code: 6, http: 409, reason: "NODE_POOL_NAME_TAKEN" },
  { name: "missing flavor", ...both({ nodeConfig: {} }), code: 3, http: 400, reason: "REQUEST_INVALID", field: "nodeConfig.computeFlavor" },
  { name: "unknown flavor", ...both({ nodeConfig: { computeFlavor: "cpu.huge" } }), code: 3, http: 400, reason: "REQUEST_INVALID", field: "nodeConfig.computeFlavor" },
  { name: "negative count", ...both({ scalePolicy: { fixedScale: { count: -1 } } }), code: 3, http: 400, reason: "REQUEST_INVALID", field: "scalePolicy.fixedScale.count" },
  { name: "count above the largest pool", ...both({ scalePolicy: { fixedScale: { count: 21 } } }), code: 3, http: 400, reason: "REQUEST_INVALID", field: "scalePolicy.fixedScale.count" },
  { name: "missing clusterId", ...both({ clusterId: "" }), code: 3, http: 400, reason: "REQUEST_INVALID", field: "clusterId" },
  // gRPC has one serviceInstanceId field, so there is nothing to mismatch; REST compares body and path.
  {
    name: "body serviceInstanceId unlike the path's",
    rest: createRest(createBody({ serviceInstanceId: OTHER_VDC })),
    code: 3,
    http: 400,
    reason: "FIELD_MISMATCH",
    field: "serviceInstanceId",
  },
  {
    name: "cluster of another service instance",
    rest: { method: "POST", path: () => `/cluster/v1/${OTHER_VDC}/node-pools`, body: createBody() },
    grpc: createGrpc(createBody(), OTHER_VDC),
    code: 5,
    http: 404,
    reason: "CLUSTER_NOT_FOUND",
  },
  { name: "unknown cluster", ...both({ clusterId: "cl-nope" }), code: 5, http: 404, reason: "CLUSTER_NOT_FOUND" },
  {
    name: "unknown service instance",
    rest: { method: "POST", path: () => "/cluster/v1/vdc-nope/node-pools", body: createBody() },
    grpc: createGrpc(createBody(), "vdc-nope"),
    code: 5,
    http: 404,
    reason: "SERVICE_INSTANCE_NOT_FOUND",
  },
  {
    name: "rename to a taken name",
    rest: { method: "PATCH", path: () => `/cluster/v1/${VDC}/node-pools/${taken}`, body: { nodePoolName: "second-name" } },
    grpc: { method: "UpdateNodePool", request: () => ({ serviceInstanceId: VDC, nodePoolId: taken, nodePoolName: "second-name" }) },
    code: 6,
    http: 409,
    reason: "NODE_POOL_NAME_TAKEN",
  },
  {
    name: "an update while a task runs",
    rest: { method: "PATCH", path: () => `/cluster/v1/${VDC}/node-pools/${busy}`, body: { scalePolicy: { fixedScale: { count: 2 } } } },
    grpc: { method: "UpdateNodePool", request: () => ({ serviceInstanceId: VDC, nodePoolId: busy, scalePolicy: { fixedScale: { count: 2 } } }) },
    code: 9,
    http: 400,
    reason: "NODE_POOL_TASK_IN_PROGRESS",
  },
  {
    name: "a delete while a task runs",
    rest: { method: "DELETE", path: () => `/cluster/v1/${VDC}/node-pools/${busy}` },
    grpc: { method: "DeleteNodePool", request: () => ({ serviceInstanceId: VDC, nodePoolId: busy }) },
    code: 9,
    http: 400,
    reason: "NODE_POOL_TASK_IN_PROGRESS",
  },
  {
    name: "an update with nothing to change",
    rest: { method: "PATCH", path: () => `/cluster/v1/${VDC}/node-pools/${taken}`, body: {} },
    grpc: { method: "UpdateNodePool", request: () => ({ serviceInstanceId: VDC, nodePoolId: taken }) },
    code: 3,
    http: 400,
    reason: "REQUEST_INVALID",
    field: "nodePoolName",
  },
  {
    name: "a wait above 60s",
    rest: { method: "POST", path: () => `/cluster/v1/${VDC}/tasks/any-task:wait`, body: { timeout: "61s" } },
    grpc: { method: "WaitTask", request: () => ({ serviceInstanceId: VDC, taskId: "any-task", timeout: { seconds: 61 } }) },
    code: 3,
    http: 400,
    reason: "REQUEST_INVALID",
    field: "timeout",
  },
  {
    // Over the bound by a nanosecond: truncated to milliseconds, it was accepted.
    name: "a wait of 60.000000001s",
    rest: { method: "POST", path: () => `/cluster/v1/${VDC}/tasks/any-task:wait`, body: { timeout: "60.000000001s" } },
    grpc: { method: "WaitTask", request: () => ({ serviceInstanceId: VDC, taskId: "any-task", timeout: { seconds: 60, nanos: 1 } }) },
    code: 3,
    http: 400,
    reason: "REQUEST_INVALID",
    field: "timeout",
  },
  {
    name: "a wait of -0.000000001s",
    rest: { method: "POST", path: () => `/cluster/v1/${VDC}/tasks/any-task:wait`, body: { timeout: "-0.000000001s" } },
    grpc: { method: "WaitTask", request: () => ({ serviceInstanceId: VDC, taskId: "any-task", timeout: { seconds: 0, nanos: -1 } }) },
    code: 3,
    http: 400,
    reason: "REQUEST_INVALID",
    field: "timeout",
  },
  {
    // Not a Duration: nanos of another sign than the seconds, which only the binary form can send. It was waited
    // for as 0.999999999s and answered with the task.
    name: "a wait of {seconds: 1, nanos: -1}",
    grpc: { method: "WaitTask", request: () => ({ serviceInstanceId: VDC, taskId: "any-task", timeout: { seconds: 1, nanos: -1 } }) },
    code: 3,
    http: 400,
    reason: "REQUEST_INVALID",
    field: "timeout",
  },
];

// The type and the decisive fields of each detail, whichever surface it came from.
function summarize(details: JsonObject[]): JsonObject[] {
  return details.map((d): JsonObject => {
    const type = String(d["@type"]).replace("type.googleapis.com/google.rpc.", "");
    if (type === "ErrorInfo") return { type, reason: d.reason ?? "" };
    if (type === "BadRequest") return { type, fields: ((d.fieldViolations as JsonObject[] | undefined) ?? []).map((v) => v.field ?? "") };
    if (type === "PreconditionFailure") return { type, kinds: ((d.violations as JsonObject[] | undefined) ?? []).map((v) => v.type ?? "") };
    return { type };
  });
}

function expectedDetails(row: Row): JsonObject[] {
  const info = { type: "ErrorInfo", reason: row.reason };
  if (row.code === 3) return [info, { type: "BadRequest", fields: [row.field ?? ""] }];
  if (row.code === 5 || row.code === 6) return [info, { type: "ResourceInfo" }];
  if (row.code === 9) return [info, { type: "PreconditionFailure", kinds: ["STATE"] }];
  return [info];
}

describe("bad node pool requests", () => {
  it.each(rows.filter((r) => r.rest !== undefined).map((r) => [r.name, r] as const))("REST: %s", async (_, row) => {
    const before = await counts();
    const { method, path, body } = row.rest!;
    const res = await rest(server.url, method, path(), body);
    expect(res.status).toBe(row.http);
    expect(res.json.code).toBe(row.code);
    expect(summarize(restDetails(res.json))).toEqual(expectedDetails(row));
    expect(await counts()).toEqual(before);
  });

  it.each(rows.filter((r) => r.grpc !== undefined).map((r) => [r.name, r] as const))("gRPC: %s", async (_, row) => {
    const before = await counts();
    const { method, request } = row.grpc!;
    const service = method === "WaitTask" ? "TaskService" : "NodePoolService";
    const failure = await grpc.failure(service, method, request());
    expect(failure.code).toBe(row.code);
    expect(summarize(failure.details)).toEqual(expectedDetails(row));
    expect(await counts()).toEqual(before);
  });

  it("still runs the busy pool's task: nothing above disturbed it", async () => {
    const tasks = await rest(server.url, "GET", `/cluster/v1/${VDC}/tasks?nodePoolId=${busy}`);
    expect((tasks.json.tasks as JsonObject[]).map((t) => [t.command, t.status])).toEqual([["CreateNodePool", "RUNNING"]]);
  });
});
