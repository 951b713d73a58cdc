import { DomainError } from "../../errors/domain-error.js";
import { deadlineExceeded } from "../../errors/protocol-errors.js";
import type { ServiceHandlers } from "../../pipeline/handlers.js";
import type { TaskService } from "../../../gen/compute/cluster/v1/task_pb.js";
import type { TaskManager } from "./task-manager.js";
import { taskToProto } from "./task-to-proto.js";

// The transport side of tasks: unpacks requests for the TaskManager and packs its records into messages.
export function createTaskService(tasks: TaskManager): ServiceHandlers<typeof TaskService> {
  return {
    async getTask(req) {
      return { task: taskToProto(await tasks.get(req.serviceInstanceId, req.taskId)) };
    },

    async listTasks(req) {
      const page = { limit: req.page?.limit ?? 0, offset: req.page?.offset ?? 0 };
      const list = await tasks.list(req.serviceInstanceId, req.nodePoolId, page);
      return { tasks: list.map(taskToProto) };
    },

    // The call's signal ends the wait when the caller gives up or its deadline passes. Either way the answer is
    // DEADLINE_EXCEEDED, not the task as it is: on the calls connect-node serves, its own deadline timer aborts the
    // signal as the pipeline's fires, and the task returned by whichever came first made the answer OK on some
    // protocols and runs and DEADLINE_EXCEEDED on others (a probe, 2026-11-27).
    async waitTask(req, call) {
      const task = await tasks.wait(req.serviceInstanceId, req.taskId, req.timeout, call.signal);
      // The server's own reason when it stops (a DomainError); else a deadline, or a caller who left and reads nothing.
      if (call.signal.aborted) throw call.signal.reason instanceof DomainError ? call.signal.reason : deadlineExceeded(call.entry.policy.domain);
      return { task: taskToProto(task) };
    },
  };
}
