import type { TaskFailure } from "../tasks/task-model.js";

// vApps and their tasks: plain data; times are epoch milliseconds.

// The virtualization API's status codes of a vApp that this server uses.
export const VAPP_STATUS = {
  FAILED_CREATION: -1,
  UNRESOLVED: 0,
  POWERED_ON: 4,
  POWERED_OFF: 8,
} as const;

export interface VAppRecord {
  id: string;
  name: string;
  description: string;
  serviceInstanceId: string;
  templateId: string;
  networkName: string;
  // What the caller asked for; applied by the creation task.
  deploy: boolean;
  powerOn: boolean;
  // One of VAPP_STATUS.
  status: number;
  deployed: boolean;
  createdBy: string;
  createdAt: number;
  modifiedAt: number;
  // The task that creates the vApp.
  taskId: string;
}

// The virtualization API's task statuses. This server creates tasks running (vapp-manager.ts); queued is part of
// the API's vocabulary that it never reports.
export const vAppTaskStatuses = ["queued", "running", "success", "error"] as const;
export type VAppTaskStatus = (typeof vAppTaskStatuses)[number];

export interface VAppTaskRecord {
  id: string;
  // The one kind of vApp task so far.
  command: "InstantiateVAppTemplate";
  status: VAppTaskStatus;
  vappId: string;
  vappName: string;
  serviceInstanceId: string;
  createdBy: string;
  createdAt: number;
  // Set once the task is done.
  endedAt: number | null;
  // Set when status is "error".
  failure: TaskFailure | null;
  attempts: number;
}

export function isVAppTaskDone(status: VAppTaskStatus): boolean {
  return status === "success" || status === "error";
}
