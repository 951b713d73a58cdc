import { create } from "@bufbuild/protobuf";
import { anyPack, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { NodePoolSchema, NodePoolTaskMetadataSchema } from "../../../gen/compute/cluster/v1/node_pool_pb.js";
import { Task_Status, TaskSchema } from "../../../gen/compute/cluster/v1/task_pb.js";
import type { Task } from "../../../gen/compute/cluster/v1/task_pb.js";
import type { Status } from "../../../gen/google/rpc/status_pb.js";
import { DomainError } from "../../errors/domain-error.js";
import { domainErrorToStatus, internalStatus } from "../../errors/to-status.js";
import { nodePoolToProto } from "../node-pools/node-pool-to-proto.js";
import { isDone } from "./task-model.js";
import type { TaskFailure, TaskRecord } from "./task-model.js";

export function taskToProto(t: TaskRecord): Task {
  return create(TaskSchema, {
    id: t.id,
    command: t.command,
    status: Task_Status[t.status],
    createdAt: timestampFromMs(t.createdAt),
    modifiedAt: timestampFromMs(t.modifiedAt),
    createdBy: t.createdBy,
    serviceInstanceId: t.serviceInstanceId,
    error: t.failure === null ? undefined : failureToStatus(t.id, t.failure),
    metadata: anyPack(NodePoolTaskMetadataSchema, create(NodePoolTaskMetadataSchema, { nodePoolId: t.nodePoolId, clusterId: t.clusterId })),
    response: t.result === null ? undefined : anyPack(NodePoolSchema, nodePoolToProto(t.result)),
    done: isDone(t.status),
  });
}

// The same google.rpc.Status a call failing with this error would carry.
function failureToStatus(taskId: string, failure: TaskFailure): Status {
  if (failure.kind === "domain") return domainErrorToStatus(new DomainError(failure.error));
  return internalStatus("compute", `internal error while running task ${taskId}; quote the task id when reporting it`, { taskId });
}
