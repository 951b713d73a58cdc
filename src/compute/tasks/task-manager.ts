import type { Duration } from "@bufbuild/protobuf/wkt";
import { INVALID_DURATION, durationText, isValidDuration } from "../../shared/duration.js";
import type { ComputeStore, TaskPage } from "../../storage/compute-store.js";
import type { Catalog } from "../catalog/catalog.js";
import { findServiceInstance } from "../catalog/catalog.js";
import { serviceInstanceNotFound, taskNotFound } from "../compute-errors.js";
import { Violations } from "../violations.js";
import { isDone } from "./task-model.js";
import type { TaskRecord } from "./task-model.js";
import type { TaskNotifier } from "./task-notifier.js";

export const DEFAULT_WAIT_MS = 30_000;
export const MAX_WAIT_MS = 60_000;

// A wait's timeout in milliseconds, fractions included, so that the range is checked to the nanosecond: 60.000000001s
// is over the 60 s bound and -0.000000001s below 0 (truncated to milliseconds, both were accepted).
function timeoutMsOf(v: Violations, timeout: Duration | undefined): number | undefined {
  if (timeout === undefined) return undefined;
  // Checked first: {seconds: 1, nanos: -1} and {seconds: 0, nanos: 2e9} were waited for as 0.999999999s and 2s.
  if (!isValidDuration(timeout)) {
    v.add("timeout", INVALID_DURATION);
    return undefined;
  }
  const ms = Number(timeout.seconds) * 1000 + timeout.nanos / 1e6;
  if (ms < 0 || ms > MAX_WAIT_MS) v.add("timeout", `must be between 0s and ${MAX_WAIT_MS / 1000}s, got ${durationText(timeout)}`);
  return ms;
}
const MAX_PAGE = 1000;

export interface TaskPageInput {
  limit: number;
  offset: number;
}

// Reading and waiting on tasks. A task is visible only under its own service instance.
export class TaskManager {
  constructor(
    private readonly store: ComputeStore,
    private readonly catalog: Catalog,
    private readonly notifier: TaskNotifier,
  ) {}

  async get(serviceInstanceId: string, taskId: string): Promise<TaskRecord> {
    const v = new Violations();
    v.requiredId("serviceInstanceId", serviceInstanceId);
    v.requiredId("taskId", taskId);
    v.throwIfAny();
    return this.read(serviceInstanceId, taskId);
  }

  private async read(serviceInstanceId: string, taskId: string): Promise<TaskRecord> {
    if (findServiceInstance(this.catalog, serviceInstanceId) === undefined) throw serviceInstanceNotFound(serviceInstanceId);
    const task = await this.store.getTask(taskId);
    if (task === null || task.serviceInstanceId !== serviceInstanceId) throw taskNotFound(serviceInstanceId, taskId);
    return task;
  }

  async list(serviceInstanceId: string, nodePoolId: string, page: TaskPageInput): Promise<TaskRecord[]> {
    const v = new Violations();
    v.requiredId("serviceInstanceId", serviceInstanceId);
    if (page.limit < 0 || page.limit > MAX_PAGE) v.add("page.limit", `must be between 0 and ${MAX_PAGE} (0 means 100), got ${page.limit}`);
    if (page.offset < 0) v.add("page.offset", `must be at least 0, got ${page.offset}`);
    v.throwIfAny();
    if (findServiceInstance(this.catalog, serviceInstanceId) === undefined) throw serviceInstanceNotFound(serviceInstanceId);
    const bounded: TaskPage = { limit: page.limit === 0 ? 100 : page.limit, offset: page.offset };
    return this.store.listTasks(serviceInstanceId, nodePoolId === "" ? null : nodePoolId, bounded);
  }

  // Returns the task once it is done, or as it is when `timeout` (undefined: the default) passes, when `signal`
  // aborts (the caller went away), or when the server stops. Waiting costs a timer and a callback, no polling.
  async wait(serviceInstanceId: string, taskId: string, timeout: Duration | undefined, signal: AbortSignal): Promise<TaskRecord> {
    const v = new Violations();
    v.requiredId("serviceInstanceId", serviceInstanceId);
    v.requiredId("taskId", taskId);
    const timeoutMs = timeoutMsOf(v, timeout);
    v.throwIfAny();
    let wake = (): void => {};
    const woken = new Promise<void>((resolve) => (wake = resolve));
    // Subscribed before the first read, so a task finishing in between still wakes this waiter.
    const unsubscribe = this.notifier.subscribe(taskId, wake);
    const timer = setTimeout(wake, timeoutMs ?? DEFAULT_WAIT_MS);
    signal.addEventListener("abort", wake);
    if (signal.aborted) wake();
    try {
      const task = await this.read(serviceInstanceId, taskId);
      if (isDone(task.status) || timeoutMs === 0) return task;
      await woken;
      return await this.read(serviceInstanceId, taskId);
    } finally {
      unsubscribe();
      clearTimeout(timer);
      signal.removeEventListener("abort", wake);
    }
  }
}
