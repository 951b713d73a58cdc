import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { JsonObject } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodePool_State, NodePoolSchema, NodePoolService, NodePoolTaskMetadataSchema } from "../../gen/compute/cluster/v1/node_pool_pb.js";
import type { NodePool } from "../../gen/compute/cluster/v1/node_pool_pb.js";
import { Task_Status, TaskService } from "../../gen/compute/cluster/v1/task_pb.js";
import { ErrorInfoSchema, QuotaFailureSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { computeJsonRegistry } from "../../src/compute/compute-module.js";
import { FakeClock } from "../support/fake-clock.js";
import { adminAuthInterceptor } from "../support/kms-clients.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { CLUSTER, ComputeGrpcClient, FLAVOR, VDC, base64, rest, unpack, writeTestCatalog } from "./compute-helpers.js";
import type { GrpcNodePool, GrpcTask } from "./compute-helpers.js";

// The whole life of a node pool on every protocol: create, wait, read the pool from task.response, rename and
// rescale, delete, and NOT_FOUND at the end; and a task that fails with a QuotaFailure a program can read.

const T0 = "2026-01-01T00:00:00Z";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let server: TestServer;
let catalogDir: ReturnType<typeof tempDir>;

beforeAll(async () => {
  catalogDir = tempDir();
  // A fixed clock makes every timestamp of the REST bodies exact; the provider adds nodes at once.
  server = await startServer({ env: { CATALOG_FILE: writeTestCatalog(catalogDir.path), PROVIDER_DELAY_MS: "0" }, clock: new FakeClock() });
});

afterAll(async () => {
  await server.stop();
  catalogDir.remove();
});

describe("over grpc-js, with the .proto files loaded at run time", () => {
  let client: ComputeGrpcClient;
  beforeAll(() => {
    client = new ComputeGrpcClient(server.port);
  });
  afterAll(() => client.close());

  const waitTask = async (taskId: string) =>
    (await client.call<{ task: GrpcTask }>("TaskService", "WaitTask", { serviceInstanceId: VDC, taskId, timeout: { seconds: 30 } })).task;

  it("creates, waits, renames and rescales, deletes, and then finds nothing", async () => {
    const { task } = await client.call<{ task: GrpcTask }>("NodePoolService", "CreateNodePool", {
      serviceInstanceId: VDC,
      clusterId: CLUSTER,
      nodeConfig: { computeFlavor: FLAVOR },
      nodePoolName: "grpc-pool",
      scalePolicy: { fixedScale: { count: 2 } },
    });
    expect(task).toMatchObject({ command: "CreateNodePool", createdBy: server.adminId, serviceInstanceId: VDC });
    expect(["PENDING", "RUNNING"]).toContain(task.status);
    const nodePoolId = String(unpack(task.metadata).nodePoolId);
    expect(nodePoolId).toMatch(UUID);

    const created = await waitTask(task.id);
    expect(created).toMatchObject({ status: "SUCCEEDED", done: true });
    expect(created.response?.type_url).toBe("type.googleapis.com/compute.cluster.v1.NodePool");
    expect(unpack(created.response)).toEqual({
      nodePoolId,
      clusterId: CLUSTER,
      name: "grpc-pool",
      nodeConfig: { computeFlavor: FLAVOR },
      scalePolicy: { fixedScale: { count: 2 } },
      state: "RUNNING",
    });

    const update = await client.call<{ task: GrpcTask }>("NodePoolService", "UpdateNodePool", {
      serviceInstanceId: VDC,
      nodePoolId,
      nodePoolName: "grpc-pool-2",
      scalePolicy: { fixedScale: { count: 4 } },
    });
    expect(update.task.command).toBe("UpdateNodePool");
    const updated = await waitTask(update.task.id);
    expect(unpack(updated.response)).toMatchObject({ name: "grpc-pool-2", scalePolicy: { fixedScale: { count: 4 } }, state: "RUNNING" });
    const { nodePool } = await client.call<{ nodePool: GrpcNodePool }>("NodePoolService", "GetNodePool", { serviceInstanceId: VDC, nodePoolId });
    expect(nodePool).toMatchObject({ name: "grpc-pool-2", state: "RUNNING", scalePolicy: { fixedScale: { count: 4 } } });

    const removal = await client.call<{ task: GrpcTask }>("NodePoolService", "DeleteNodePool", { serviceInstanceId: VDC, nodePoolId });
    const deleted = await waitTask(removal.task.id);
    expect(deleted).toMatchObject({ command: "DeleteNodePool", status: "SUCCEEDED", done: true });
    expect(deleted.response).toBeUndefined();

    const missing = await client.failure("NodePoolService", "GetNodePool", { serviceInstanceId: VDC, nodePoolId });
    expect(missing.code).toBe(5);
    expect(missing.details).toEqual([
      { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "NODE_POOL_NOT_FOUND", domain: "compute" },
      {
        "@type": "type.googleapis.com/google.rpc.ResourceInfo",
        resourceType: "compute.cluster.v1.NodePool",
        resourceName: nodePoolId,
        owner: VDC,
        description: `service instance ${VDC} has no node pool ${nodePoolId}`,
      },
    ]);
  });

  it("ends a create above the free capacity FAILED with code 8 and a QuotaFailure decoded from the proto types", async () => {
    const { task } = await client.call<{ task: GrpcTask }>("NodePoolService", "CreateNodePool", {
      serviceInstanceId: VDC,
      clusterId: CLUSTER,
      nodeConfig: { computeFlavor: FLAVOR },
      nodePoolName: "grpc-too-big",
      scalePolicy: { fixedScale: { count: 15 } },
    });
    const failed = await waitTask(task.id);
    expect(failed).toMatchObject({ status: "FAILED", done: true, error: { code: 8 } });
    const [info, quota] = failed.error?.details ?? [];
    expect(quota?.type_url).toBe("type.googleapis.com/google.rpc.QuotaFailure");
    expect(unpack(quota)).toEqual({
      violations: [{ subject: `clusters/${CLUSTER}`, description: "node capacity 10, 10 free, 15 requested" }],
    });
    expect(unpack(info)).toMatchObject({ reason: "NODE_CAPACITY_EXHAUSTED", domain: "compute", metadata: { free: "10", requested: "15" } });
    const nodePoolId = String(unpack(failed.metadata).nodePoolId);
    const { nodePool } = await client.call<{ nodePool: GrpcNodePool }>("NodePoolService", "GetNodePool", { serviceInstanceId: VDC, nodePoolId });
    expect(nodePool.state).toBe("ERROR");
  });
});

describe.each([
  ["Connect (JSON)", () => createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", jsonOptions: { registry: computeJsonRegistry }, interceptors: [adminAuthInterceptor(server.url)] })],
  ["gRPC-web (binary)", () => createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1", useBinaryFormat: true, interceptors: [adminAuthInterceptor(server.url)] })],
])("over %s", (name, transport: () => Transport) => {
  const pools = () => createClient(NodePoolService, transport());
  const tasks = () => createClient(TaskService, transport());
  const poolName = name.startsWith("Connect") ? "connect-pool" : "grpcweb-pool";

  async function waitTask(taskId: string) {
    const { task } = await tasks().waitTask({ serviceInstanceId: VDC, taskId, timeout: { seconds: 30n } });
    if (task === undefined) throw new Error("WaitTask returned no task");
    return task;
  }

  function poolOf(task: Awaited<ReturnType<typeof waitTask>>): NodePool {
    const pool = task.response === undefined ? undefined : anyUnpack(task.response, NodePoolSchema);
    if (pool === undefined) throw new Error(`task ${task.id} has no node pool response`);
    return pool;
  }

  it("creates, waits, renames and rescales, deletes, and then finds nothing", async () => {
    const { task } = await pools().createNodePool({
      serviceInstanceId: VDC,
      clusterId: CLUSTER,
      nodeConfig: { computeFlavor: FLAVOR },
      nodePoolName: poolName,
      scalePolicy: { fixedScale: { count: 1 } },
    });
    expect(task?.status).toBe(Task_Status.PENDING);
    const nodePoolId = task?.metadata === undefined ? "" : (anyUnpack(task.metadata, NodePoolTaskMetadataSchema)?.nodePoolId ?? "");

    const created = await waitTask(task!.id);
    expect(created.status).toBe(Task_Status.SUCCEEDED);
    expect(poolOf(created)).toMatchObject({ nodePoolId, name: poolName, state: NodePool_State.RUNNING, scalePolicy: { fixedScale: { count: 1 } } });

    const update = await pools().updateNodePool({ serviceInstanceId: VDC, nodePoolId, nodePoolName: `${poolName}-2`, scalePolicy: { fixedScale: { count: 0 } } });
    const updated = await waitTask(update.task!.id);
    // Scaling to 0 is a real value, distinct from leaving the count alone.
    expect(poolOf(updated)).toMatchObject({ name: `${poolName}-2`, scalePolicy: { fixedScale: { count: 0 } } });
    const { nodePools } = await pools().listNodePools({ serviceInstanceId: VDC, clusterId: CLUSTER });
    expect(nodePools.find((p) => p.nodePoolId === nodePoolId)?.name).toBe(`${poolName}-2`);

    const removal = await pools().deleteNodePool({ serviceInstanceId: VDC, nodePoolId });
    expect((await waitTask(removal.task!.id)).status).toBe(Task_Status.SUCCEEDED);

    const missing = await pools()
      .getNodePool({ serviceInstanceId: VDC, nodePoolId })
      .then(() => undefined, (err: unknown) => ConnectError.from(err));
    expect(missing?.code).toBe(Code.NotFound);
    expect(missing?.findDetails(ErrorInfoSchema)[0]?.reason).toBe("NODE_POOL_NOT_FOUND");
    expect(missing?.findDetails(ResourceInfoSchema)[0]?.resourceName).toBe(nodePoolId);
  });

  it("ends a create above the free capacity FAILED with a QuotaFailure in task.error", async () => {
    const { task } = await pools().createNodePool({
      serviceInstanceId: VDC,
      clusterId: CLUSTER,
      nodeConfig: { computeFlavor: FLAVOR },
      nodePoolName: `${poolName}-big`,
      scalePolicy: { fixedScale: { count: 11 } },
    });
    const failed = await waitTask(task!.id);
    expect(failed).toMatchObject({ status: Task_Status.FAILED, done: true, error: { code: Code.ResourceExhausted } });
    const quota = failed.error?.details[1];
    expect(quota && anyUnpack(quota, QuotaFailureSchema)?.violations[0]?.subject).toBe(`clusters/${CLUSTER}`);
  });
});

describe("over REST, with exact JSON", () => {
  const metadataOf = (nodePoolId: string) => ({
    typeUrl: "type.googleapis.com/compute.cluster.v1.NodePoolTaskMetadata",
    value: base64(toBinary(NodePoolTaskMetadataSchema, create(NodePoolTaskMetadataSchema, { nodePoolId, clusterId: CLUSTER }))),
  });
  const poolJson = (nodePoolId: string, name: string, count: number, state: string) => ({
    nodePoolId,
    clusterId: CLUSTER,
    name,
    nodeConfig: { computeFlavor: FLAVOR },
    scalePolicy: { fixedScale: { count } },
    state,
  });
  const poolAny = (nodePoolId: string, name: string, count: number) => ({
    typeUrl: "type.googleapis.com/compute.cluster.v1.NodePool",
    value: base64(
      toBinary(
        NodePoolSchema,
        create(NodePoolSchema, {
          nodePoolId,
          clusterId: CLUSTER,
          name,
          nodeConfig: { computeFlavor: FLAVOR },
          scalePolicy: { fixedScale: { count } },
          state: NodePool_State.RUNNING,
        }),
      ),
    ),
  });
  const taskJson = (id: string, command: string, nodePoolId: string, rest: JsonObject) => ({
    task: { id, command, createdAt: T0, modifiedAt: T0, createdBy: server.adminId, serviceInstanceId: VDC, metadata: metadataOf(nodePoolId), ...rest },
  });
  const waitBody = { timeout: "30s" };

  it("creates, waits, renames and rescales, deletes, and then finds nothing", async () => {
    const created = await rest(server.url, "POST", `/cluster/v1/${VDC}/node-pools`, {
      serviceInstanceId: VDC,
      clusterId: CLUSTER,
      nodeConfig: { computeFlavor: FLAVOR },
      nodePoolName: "rest-pool",
      scalePolicy: { fixedScale: { count: 2 } },
    });
    expect(created.status).toBe(200);
    const taskId = String((created.json.task as JsonObject).id);
    const metadata = (created.json.task as JsonObject).metadata as { value: string };
    const nodePoolId = fromBinary(NodePoolTaskMetadataSchema, Buffer.from(metadata.value, "base64")).nodePoolId;
    expect(created.json).toEqual(taskJson(taskId, "CreateNodePool", nodePoolId, { status: "PENDING" }));

    const done = await rest(server.url, "POST", `/cluster/v1/${VDC}/tasks/${taskId}:wait`, waitBody);
    expect(done).toEqual({
      status: 200,
      json: taskJson(taskId, "CreateNodePool", nodePoolId, { status: "SUCCEEDED", response: poolAny(nodePoolId, "rest-pool", 2), done: true }),
    });
    const response = (done.json.task as JsonObject).response as { value: string };
    expect(fromBinary(NodePoolSchema, Buffer.from(response.value, "base64"))).toMatchObject({ nodePoolId, name: "rest-pool", state: NodePool_State.RUNNING });
    expect(await rest(server.url, "GET", `/cluster/v1/${VDC}/tasks/${taskId}`)).toEqual(done);
    expect(await rest(server.url, "GET", `/cluster/v1/${VDC}/node-pools/${nodePoolId}`)).toEqual({
      status: 200,
      json: { nodePool: poolJson(nodePoolId, "rest-pool", 2, "RUNNING") },
    });

    const patched = await rest(server.url, "PATCH", `/cluster/v1/${VDC}/node-pools/${nodePoolId}`, {
      nodePoolName: "rest-pool-2",
      scalePolicy: { fixedScale: { count: 3 } },
    });
    const updateId = String((patched.json.task as JsonObject).id);
    expect(patched).toEqual({ status: 200, json: taskJson(updateId, "UpdateNodePool", nodePoolId, { status: "PENDING" }) });
    expect(await rest(server.url, "POST", `/cluster/v1/${VDC}/tasks/${updateId}:wait`, waitBody)).toEqual({
      status: 200,
      json: taskJson(updateId, "UpdateNodePool", nodePoolId, { status: "SUCCEEDED", response: poolAny(nodePoolId, "rest-pool-2", 3), done: true }),
    });
    const listed = await rest(server.url, "GET", `/cluster/v1/${VDC}/node-pools?clusterId=${CLUSTER}`);
    expect(listed.status).toBe(200);
    expect(listed.json.nodePools).toContainEqual(poolJson(nodePoolId, "rest-pool-2", 3, "RUNNING"));

    const deleted = await rest(server.url, "DELETE", `/cluster/v1/${VDC}/node-pools/${nodePoolId}`);
    const deleteId = String((deleted.json.task as JsonObject).id);
    expect(deleted).toEqual({ status: 200, json: taskJson(deleteId, "DeleteNodePool", nodePoolId, { status: "PENDING" }) });
    expect(await rest(server.url, "POST", `/cluster/v1/${VDC}/tasks/${deleteId}:wait`, waitBody)).toEqual({
      status: 200,
      json: taskJson(deleteId, "DeleteNodePool", nodePoolId, { status: "SUCCEEDED", done: true }),
    });

    const message = `service instance ${VDC} has no node pool ${nodePoolId}`;
    expect(await rest(server.url, "GET", `/cluster/v1/${VDC}/node-pools/${nodePoolId}`)).toEqual({
      status: 404,
      json: {
        code: 5,
        message,
        details: [
          { typeUrl: "type.googleapis.com/google.rpc.ErrorInfo", value: base64(toBinary(ErrorInfoSchema, create(ErrorInfoSchema, { reason: "NODE_POOL_NOT_FOUND", domain: "compute" }))) },
          {
            typeUrl: "type.googleapis.com/google.rpc.ResourceInfo",
            value: base64(
              toBinary(
                ResourceInfoSchema,
                create(ResourceInfoSchema, { resourceType: "compute.cluster.v1.NodePool", resourceName: nodePoolId, owner: VDC, description: message }),
              ),
            ),
          },
        ],
      },
    });

    const history = await rest(server.url, "GET", `/cluster/v1/${VDC}/tasks?nodePoolId=${nodePoolId}`);
    expect((history.json.tasks as JsonObject[]).map((t) => [t.id, t.command, t.status])).toEqual([
      [deleteId, "DeleteNodePool", "SUCCEEDED"],
      [updateId, "UpdateNodePool", "SUCCEEDED"],
      [taskId, "CreateNodePool", "SUCCEEDED"],
    ]);
  });

  it("ends a create above the free capacity FAILED with error.details[] as typeUrl and value", async () => {
    const created = await rest(server.url, "POST", `/cluster/v1/${VDC}/node-pools`, {
      clusterId: CLUSTER,
      nodeConfig: { computeFlavor: FLAVOR },
      nodePoolName: "rest-too-big",
      scalePolicy: { fixedScale: { count: 20 } },
    });
    const taskId = String((created.json.task as JsonObject).id);
    const failed = await rest(server.url, "POST", `/cluster/v1/${VDC}/tasks/${taskId}:wait`, waitBody);
    expect(failed.status).toBe(200);
    const task = failed.json.task as JsonObject;
    expect(task).toMatchObject({ status: "FAILED", done: true });
    expect(task.response).toBeUndefined();
    const error = task.error as { code: number; message: string; details: { typeUrl: string; value: string }[] };
    expect(error.code).toBe(8);
    expect(error.message).toMatch(/^cluster cl-a1 has room for \d+ more nodes \(capacity 10\) and node pool [0-9a-f-]{36} asks for 20; /);
    for (const detail of error.details) expect(Object.keys(detail).sort()).toEqual(["typeUrl", "value"]);
    expect(error.details.map((d) => d.typeUrl)).toEqual(["type.googleapis.com/google.rpc.ErrorInfo", "type.googleapis.com/google.rpc.QuotaFailure"]);
    const quota = fromBinary(QuotaFailureSchema, Buffer.from(error.details[1]!.value, "base64"));
    expect(quota.violations).toMatchObject([{ subject: `clusters/${CLUSTER}`, description: expect.stringMatching(/^node capacity 10, \d+ free, 20 requested$/) }]);
  });
});
