import { create, toBinary, toJson } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { NodePool_State, NodePoolSchema, NodePoolTaskMetadataSchema } from "../../gen/compute/cluster/v1/node_pool_pb.js";
import { Task_Status, TaskSchema } from "../../gen/compute/cluster/v1/task_pb.js";
import { ErrorInfoSchema, QuotaFailureSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { computeJsonRegistry } from "../../src/compute/compute-module.js";
import { computeFlavorUnavailable, nodeCapacityExhausted } from "../../src/compute/compute-errors.js";
import type { NodePoolRecord } from "../../src/compute/node-pools/node-pool-model.js";
import type { TaskRecord } from "../../src/compute/tasks/task-model.js";
import { taskToProto } from "../../src/compute/tasks/task-to-proto.js";
import type { DomainError } from "../../src/errors/domain-error.js";
import { statusPartsOf } from "../../src/errors/status-details.js";
import { toConnectError } from "../../src/errors/to-connect-error.js";
import { CallError } from "../../src/pipeline/call-error.js";

// A domain error as every adapter renders it.
const domainErrorToConnectError = (error: DomainError) => toConnectError(new CallError(statusPartsOf(error), false), null);
import { domainErrorToStatus } from "../../src/errors/to-status.js";
import { toRestJson } from "../../src/transport/rest/json-any.js";

const T0 = Date.parse("2026-01-01T00:00:00Z");

const pool: NodePoolRecord = {
  id: "np-1",
  serviceInstanceId: "vdc-a",
  clusterId: "cl-a1",
  name: "pool-1",
  computeFlavor: "cpu.small",
  count: 0,
  state: "RUNNING",
  activeTaskId: null,
  pendingName: null,
  createdAt: T0,
  modifiedAt: T0,
};

const task: TaskRecord = {
  id: "task-1",
  command: "CreateNodePool",
  status: "SUCCEEDED",
  serviceInstanceId: "vdc-a",
  clusterId: "cl-a1",
  nodePoolId: "np-1",
  change: { name: null, count: null, stateIfFailed: "ERROR" },
  createdBy: "alice",
  createdAt: T0,
  modifiedAt: T0 + 1500,
  failure: null,
  result: pool,
  attempts: 1,
};

const shortfall = nodeCapacityExhausted({ clusterId: "cl-a1", capacity: 10, free: 3, nodePoolId: "np-1", requested: 4 });

describe("task errors as google.rpc.Status", () => {
  it("carry the same code, message and details as the call error built from the same domain error", () => {
    for (const error of [shortfall, computeFlavorUnavailable("gpu.sold-out")]) {
      const status = domainErrorToStatus(error);
      const call = domainErrorToConnectError(error);
      expect(status.code).toBe(call.code);
      expect(status.message).toBe(call.rawMessage);
      expect(status.details.map((d) => d.typeUrl)).toEqual(call.details.map((d) => `type.googleapis.com/${"desc" in d ? d.desc.typeName : d.type}`));
    }
  });

  it("pack QuotaFailure and ErrorInfo for a capacity shortfall", () => {
    const status = domainErrorToStatus(shortfall);
    expect(status.code).toBe(8);
    const [info, quota] = status.details;
    expect(info && anyUnpack(info, ErrorInfoSchema)).toMatchObject({ reason: "NODE_CAPACITY_EXHAUSTED", domain: "compute", metadata: { free: "3" } });
    expect(quota && anyUnpack(quota, QuotaFailureSchema)?.violations).toMatchObject([{ subject: "clusters/cl-a1", description: "node capacity 10, 3 free, 4 requested" }]);
  });

  it("pack RetryInfo for an unavailable flavor", () => {
    const status = domainErrorToStatus(computeFlavorUnavailable("gpu.sold-out"));
    expect(status.code).toBe(14);
    const retry = status.details[1];
    expect(retry && anyUnpack(retry, RetryInfoSchema)?.retryDelay?.seconds).toBe(300n);
  });
});

describe("taskToProto", () => {
  it("packs the node pool as response and its id as metadata, and marks the task done", () => {
    const proto = taskToProto(task);
    expect(proto).toMatchObject({ id: "task-1", command: "CreateNodePool", status: Task_Status.SUCCEEDED, createdBy: "alice", serviceInstanceId: "vdc-a", done: true });
    expect(proto.error).toBeUndefined();
    expect(proto.response && anyUnpack(proto.response, NodePoolSchema)).toMatchObject({
      nodePoolId: "np-1",
      name: "pool-1",
      state: NodePool_State.RUNNING,
      scalePolicy: { fixedScale: { count: 0 } },
    });
    expect(proto.metadata && anyUnpack(proto.metadata, NodePoolTaskMetadataSchema)).toMatchObject({ nodePoolId: "np-1", clusterId: "cl-a1" });
  });

  it("gives an internal failure a status that names the task and nothing else", () => {
    const proto = taskToProto({ ...task, status: "FAILED", result: null, failure: { kind: "internal" } });
    expect(proto.error?.code).toBe(13);
    expect(proto.error?.message).toBe("internal error while running task task-1; quote the task id when reporting it");
    const info = proto.error?.details[0];
    expect(info && anyUnpack(info, ErrorInfoSchema)).toMatchObject({ reason: "INTERNAL", domain: "compute", metadata: { taskId: "task-1" } });
  });

  it("renders on REST with every Any as typeUrl and value", () => {
    const failed = taskToProto({ ...task, status: "FAILED", result: null, failure: { kind: "domain", error: shortfall.detail } });
    const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");
    const status = domainErrorToStatus(shortfall);
    expect(toRestJson(TaskSchema, failed)).toEqual({
      id: "task-1",
      command: "CreateNodePool",
      status: "FAILED",
      createdAt: "2026-01-01T00:00:00Z",
      modifiedAt: "2026-01-01T00:00:01.500Z",
      createdBy: "alice",
      serviceInstanceId: "vdc-a",
      error: {
        code: 8,
        message: shortfall.message,
        details: status.details.map((d) => ({ typeUrl: d.typeUrl, value: b64(d.value) })),
      },
      metadata: {
        typeUrl: "type.googleapis.com/compute.cluster.v1.NodePoolTaskMetadata",
        value: b64(toBinary(NodePoolTaskMetadataSchema, create(NodePoolTaskMetadataSchema, { nodePoolId: "np-1", clusterId: "cl-a1" }))),
      },
      done: true,
    });
  });

  it("renders in Connect's JSON with the compute registry", () => {
    const json = toJson(TaskSchema, taskToProto(task), { registry: computeJsonRegistry });
    expect(json).toMatchObject({
      response: { "@type": "type.googleapis.com/compute.cluster.v1.NodePool", nodePoolId: "np-1", scalePolicy: { fixedScale: { count: 0 } } },
      metadata: { "@type": "type.googleapis.com/compute.cluster.v1.NodePoolTaskMetadata", nodePoolId: "np-1" },
    });
    const failed = taskToProto({ ...task, status: "FAILED", result: null, failure: { kind: "domain", error: shortfall.detail } });
    expect(toJson(TaskSchema, failed, { registry: computeJsonRegistry })).toMatchObject({
      error: { code: 8, details: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo" }, { "@type": "type.googleapis.com/google.rpc.QuotaFailure" }] },
    });
  });
});
