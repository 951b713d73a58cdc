import type { VAppRecord, VAppTaskRecord } from "../compute/vapps/vapp-model.js";
import type { FinishedTaskPruning, TaskClaims } from "./task-queue.js";

// What finishing a vApp task decides: the task in its final state and the vApp as it should be stored.
export interface VAppTaskFinish {
  task: VAppTaskRecord;
  vapp: VAppRecord;
}

// Storage of vApps and their tasks, written together so that a vApp and its task are never apart. Implementations
// (row mapping in ./vapp-rows.ts, shared by every backend):
// - refuse a second vApp of the same name in a vDC (throwing the ALREADY_EXISTS domain error of vapp-errors.ts);
// - make claimTask atomic and finishTask conditional on the claim, as ComputeStore does; the workers' heartbeats are
//   ComputeStore's (compute_workers), which a claim reads;
// - keep each acknowledged write durable before the promise resolves.
export interface VAppStore extends TaskClaims<VAppTaskRecord>, FinishedTaskPruning {
  // Stores a new vApp together with its creation task.
  createVApp(vapp: VAppRecord, task: VAppTaskRecord): Promise<void>;
  getVApp(id: string): Promise<VAppRecord | null>;
  getVAppTask(id: string): Promise<VAppTaskRecord | null>;
  // Runs `decide` on the task and its vApp inside one transaction and stores the outcome, provided the task is
  // still running under `workerId`; otherwise stores nothing and returns null.
  finishVAppTask(taskId: string, workerId: string, decide: (task: VAppTaskRecord, vapp: VAppRecord) => VAppTaskFinish): Promise<VAppTaskFinish | null>;
}
