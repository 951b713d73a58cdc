import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { Clock } from "../../shared/clock.js";
import type { VAppStore, VAppTaskFinish } from "../../storage/vapp-store.js";
import type { TaskFailure } from "../tasks/task-model.js";
import { VAPP_STATUS } from "./vapp-model.js";
import type { VAppRecord, VAppTaskRecord } from "./vapp-model.js";

export interface VAppTaskRunnerSettings {
  // Time the simulated platform takes to build a vApp; 0 makes it instant.
  buildDelayMs: number;
}

// Carries out one claimed vApp creation task: the simulated platform builds the vApp (a delay), then the vApp
// takes the state its deploy and powerOn flags ask for (8 powered off, 4 powered on) and the task ends, in one
// transaction. Running it again after a crash only builds again, so it is idempotent. Returns the finished task,
// or null when the run stopped early (the server is stopping) or the claim was lost; the task then stays running
// and is resumed.
export class VAppTaskRunner {
  constructor(
    private readonly store: VAppStore,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly settings: VAppTaskRunnerSettings,
  ) {}

  async run(task: VAppTaskRecord, workerId: string, signal: AbortSignal): Promise<VAppTaskRecord | null> {
    let failure: TaskFailure | null = null;
    try {
      if (this.settings.buildDelayMs > 0) await sleep(this.settings.buildDelayMs, undefined, { signal });
    } catch (err) {
      if (signal.aborted) return null;
      this.logger.error({ err, taskId: task.id, vappId: task.vappId }, "vApp task failed with an internal error");
      failure = { kind: "internal" };
    }
    const now = this.clock.now();
    const finished = await this.store.finishVAppTask(task.id, workerId, (current, vapp) => finish(current, vapp, failure, now));
    return finished?.task ?? null;
  }
}

function finish(task: VAppTaskRecord, vapp: VAppRecord, failure: TaskFailure | null, now: number): VAppTaskFinish {
  if (failure !== null) {
    return {
      task: { ...task, status: "error", endedAt: now, failure },
      vapp: { ...vapp, status: VAPP_STATUS.FAILED_CREATION, modifiedAt: now },
    };
  }
  return {
    task: { ...task, status: "success", endedAt: now },
    vapp: { ...vapp, status: vapp.powerOn ? VAPP_STATUS.POWERED_ON : VAPP_STATUS.POWERED_OFF, deployed: vapp.deploy, modifiedAt: now },
  };
}
