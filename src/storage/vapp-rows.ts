import type { TaskFailure } from "../compute/tasks/task-model.js";
import type { VAppRecord, VAppTaskRecord, VAppTaskStatus } from "../compute/vapps/vapp-model.js";

// The rows of the vapps and vapp_tasks tables and their mapping to records, apart from any one database so that
// every backend stores the same columns. Booleans are 0/1 integers; the failure is a small JSON document.

export interface VAppRow {
  id: string;
  name: string;
  description: string;
  service_instance_id: string;
  template_id: string;
  network_name: string;
  deploy: number;
  power_on: number;
  status: number;
  deployed: number;
  created_by: string;
  created_at: number;
  modified_at: number;
  task_id: string;
}

export interface VAppTaskRow {
  id: string;
  command: string;
  status: string;
  vapp_id: string;
  vapp_name: string;
  service_instance_id: string;
  created_by: string;
  created_at: number;
  ended_at: number | null;
  failure: string | null;
  attempts: number;
}

export function vappFromRow(r: VAppRow): VAppRecord {
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    serviceInstanceId: r.service_instance_id,
    templateId: r.template_id,
    networkName: r.network_name,
    deploy: r.deploy === 1,
    powerOn: r.power_on === 1,
    status: r.status,
    deployed: r.deployed === 1,
    createdBy: r.created_by,
    createdAt: r.created_at,
    modifiedAt: r.modified_at,
    taskId: r.task_id,
  };
}

export function vappToRow(v: VAppRecord): VAppRow {
  return {
    id: v.id,
    name: v.name,
    description: v.description,
    service_instance_id: v.serviceInstanceId,
    template_id: v.templateId,
    network_name: v.networkName,
    deploy: v.deploy ? 1 : 0,
    power_on: v.powerOn ? 1 : 0,
    status: v.status,
    deployed: v.deployed ? 1 : 0,
    created_by: v.createdBy,
    created_at: v.createdAt,
    modified_at: v.modifiedAt,
    task_id: v.taskId,
  };
}

export function vappTaskFromRow(r: VAppTaskRow): VAppTaskRecord {
  return {
    id: r.id,
    command: "InstantiateVAppTemplate",
    status: r.status as VAppTaskStatus,
    vappId: r.vapp_id,
    vappName: r.vapp_name,
    serviceInstanceId: r.service_instance_id,
    createdBy: r.created_by,
    createdAt: r.created_at,
    endedAt: r.ended_at,
    failure: r.failure === null ? null : (JSON.parse(r.failure) as TaskFailure),
    attempts: r.attempts,
  };
}

export function vappTaskToRow(t: VAppTaskRecord): VAppTaskRow {
  return {
    id: t.id,
    command: t.command,
    status: t.status,
    vapp_id: t.vappId,
    vapp_name: t.vappName,
    service_instance_id: t.serviceInstanceId,
    created_by: t.createdBy,
    created_at: t.createdAt,
    ended_at: t.endedAt,
    failure: t.failure === null ? null : JSON.stringify(t.failure),
    attempts: t.attempts,
  };
}
