import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { VAppSchema, VAppTask_Status, VAppTaskSchema, VAppTemplateSchema } from "../../../gen/compute/vapp/v1/vapp_pb.js";
import type { VApp, VAppTask, VAppTemplate } from "../../../gen/compute/vapp/v1/vapp_pb.js";
import type { Status } from "../../../gen/google/rpc/status_pb.js";
import { DomainError } from "../../errors/domain-error.js";
import { domainErrorToStatus, internalStatus } from "../../errors/to-status.js";
import type { TaskFailure } from "../tasks/task-model.js";
import { isVAppTaskDone } from "./vapp-model.js";
import type { VAppRecord, VAppTaskRecord } from "./vapp-model.js";
import type { TemplateRecord } from "./vapp-templates.js";

const taskStatuses = { queued: VAppTask_Status.QUEUED, running: VAppTask_Status.RUNNING, success: VAppTask_Status.SUCCESS, error: VAppTask_Status.ERROR };

// The template's href is the virtualization API's, on the host the request was sent to.
export function templateToProto(t: TemplateRecord, site: string): VAppTemplate {
  return create(VAppTemplateSchema, {
    id: t.id,
    name: t.name,
    href: `https://${site}/api/vAppTemplate/vappTemplate-${t.id}`,
    catalogName: t.catalogName,
    serviceInstanceId: t.serviceInstanceId,
    vdcName: t.vdcName,
    ownerName: t.ownerName,
    status: t.status,
    isDeployed: t.isDeployed,
    isGoldMaster: t.isGoldMaster,
    isEnabled: t.isEnabled,
    storageProfileName: t.storageProfileName,
    needsEula: t.needsEula,
  });
}

// A vApp lists its creation task while that runs, as the virtualization API does. A task the retention deleted
// (null) was finished, so it is not listed either.
export function vappToProto(v: VAppRecord, task: VAppTaskRecord | null): VApp {
  return create(VAppSchema, {
    id: v.id,
    name: v.name,
    description: v.description,
    serviceInstanceId: v.serviceInstanceId,
    templateId: v.templateId,
    networkName: v.networkName,
    status: v.status,
    deployed: v.deployed,
    createdBy: v.createdBy,
    createdAt: timestampFromMs(v.createdAt),
    tasks: task === null || isVAppTaskDone(task.status) ? [] : [vappTaskToProto(task)],
  });
}

export function vappTaskToProto(t: VAppTaskRecord): VAppTask {
  return create(VAppTaskSchema, {
    id: t.id,
    status: taskStatuses[t.status],
    operation: `Creating Virtual Application ${t.vappName}(${t.vappId})`,
    operationName: "vdcInstantiateVapp",
    vappId: t.vappId,
    vappName: t.vappName,
    serviceInstanceId: t.serviceInstanceId,
    createdBy: t.createdBy,
    startTime: timestampFromMs(t.createdAt),
    endTime: t.endedAt === null ? undefined : timestampFromMs(t.endedAt),
    error: t.failure === null ? undefined : failureToStatus(t.id, t.failure),
  });
}

function failureToStatus(taskId: string, failure: TaskFailure): Status {
  if (failure.kind === "domain") return domainErrorToStatus(new DomainError(failure.error));
  return internalStatus("compute", `internal error while running task ${taskId}; quote the task id when reporting it`, { taskId });
}
