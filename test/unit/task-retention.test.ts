import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { NodePoolRecord } from "../../src/compute/node-pools/node-pool-model.js";
import { TASK_PRUNE_PIECE, TaskRetention, pruneFinishedTasks } from "../../src/compute/tasks/task-retention.js";
import type { TaskRecord, TaskStatus } from "../../src/compute/tasks/task-model.js";
import { VAPP_STATUS } from "../../src/compute/vapps/vapp-model.js";
import type { VAppRecord, VAppTaskRecord, VAppTaskStatus } from "../../src/compute/vapps/vapp-model.js";
import { createLogger } from "../../src/logger.js";
import { openSqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import type { Storage } from "../../src/storage/storage.js";
import type { FinishedTaskPruning } from "../../src/storage/task-queue.js";
import { FakeClock } from "../support/fake-clock.js";
import { logLines } from "../support/log-lines.js";
import { tempDir } from "../support/temp-dir.js";

// The task retention on the real embedded store, with a fake clock: finished tasks of both kinds are deleted once
// they finished longer ago than the retention period, never an unfinished one.

const DAY = 24 * 3600 * 1000;
const RETENTION = 30 * DAY;

// The real store, with its prune calls counted.
function counting(store: FinishedTaskPruning): FinishedTaskPruning & { prunes: number } {
  const counted = {
    prunes: 0,
    pruneFinishedTasks(before: number, limit: number) {
      counted.prunes++;
      return store.pruneFinishedTasks(before, limit);
    },
  };
  return counted;
}

describe("task retention", () => {
  const dir = tempDir();
  let storage: Storage | null = null;
  let retention: TaskRetention | null = null;

  afterEach(async () => {
    await retention?.stop();
    retention = null;
    await storage?.close();
    storage = null;
  });
  afterAll(() => dir.remove());

  async function open(): Promise<Storage> {
    storage = await openSqliteStorage(`${dir.path}/${Math.random().toString(36).slice(2)}`, createLogger("silent"));
    return storage;
  }

  // A pool with one task, created `createdDaysAgo` and (when finished) finished `finishedDaysAgo`. The store takes the
  // task as given, so its age is set without running it.
  async function poolTask(s: Storage, clock: FakeClock, id: string, status: TaskStatus, createdDaysAgo: number, finishedDaysAgo = createdDaysAgo): Promise<void> {
    const createdAt = clock.now() - createdDaysAgo * DAY;
    const finished = status === "SUCCEEDED" || status === "FAILED";
    const pool: NodePoolRecord = {
      id: `pool-${id}`,
      serviceInstanceId: "vdc-a",
      clusterId: "cl-a",
      name: `pool-${id}`,
      computeFlavor: "cpu.2C.8G",
      count: 1,
      state: finished ? "RUNNING" : "PROVISIONING",
      activeTaskId: finished ? null : id,
      pendingName: null,
      createdAt,
      modifiedAt: createdAt,
    };
    await s.compute.createNodePool(pool, poolTaskRecord(id, pool.id, status, createdAt, clock.now() - finishedDaysAgo * DAY));
  }

  function poolTaskRecord(id: string, nodePoolId: string, status: TaskStatus, createdAt: number, modifiedAt: number): TaskRecord {
    return {
      id,
      command: "CreateNodePool",
      status,
      serviceInstanceId: "vdc-a",
      clusterId: "cl-a",
      nodePoolId,
      change: { name: null, count: 1, stateIfFailed: "ERROR" },
      createdBy: "principal-a",
      createdAt,
      modifiedAt,
      failure: status === "FAILED" ? { kind: "internal" } : null,
      result: null,
      attempts: status === "PENDING" ? 0 : 1,
    };
  }

  async function vappTask(s: Storage, clock: FakeClock, id: string, status: VAppTaskStatus, createdDaysAgo: number, finishedDaysAgo = createdDaysAgo): Promise<void> {
    const createdAt = clock.now() - createdDaysAgo * DAY;
    const finished = status === "success" || status === "error";
    const vapp: VAppRecord = {
      id: `vapp-${id}`,
      name: `vapp-${id}`,
      description: "",
      serviceInstanceId: "vdc-a",
      templateId: "tpl-1",
      networkName: "net-1",
      deploy: false,
      powerOn: false,
      status: finished ? VAPP_STATUS.POWERED_OFF : VAPP_STATUS.UNRESOLVED,
      deployed: false,
      createdBy: "principal-a",
      createdAt,
      modifiedAt: createdAt,
      taskId: id,
    };
    const task: VAppTaskRecord = {
      id,
      command: "InstantiateVAppTemplate",
      status,
      vappId: vapp.id,
      vappName: vapp.name,
      serviceInstanceId: "vdc-a",
      createdBy: "principal-a",
      createdAt,
      endedAt: finished ? clock.now() - finishedDaysAgo * DAY : null,
      failure: status === "error" ? { kind: "internal" } : null,
      attempts: finished ? 1 : 0,
    };
    await s.vapps.createVApp(vapp, task);
  }

  async function poolTasksLeft(s: Storage): Promise<string[]> {
    return (await s.compute.listTasks("vdc-a", null, { limit: 1000, offset: 0 })).map((t) => t.id).sort();
  }

  async function vappTasksLeft(s: Storage, ids: string[]): Promise<string[]> {
    const left: string[] = [];
    for (const id of ids) if ((await s.vapps.getVAppTask(id)) !== null) left.push(id);
    return left;
  }

  it("deletes the tasks finished before the retention period, keeps the later ones and every unfinished one, and says so in the log", async () => {
    const clock = new FakeClock();
    const s = await open();
    await poolTask(s, clock, "p-succeeded-31d", "SUCCEEDED", 31);
    await poolTask(s, clock, "p-failed-400d", "FAILED", 400);
    // Created long ago, finished recently: its age counts from the finish.
    await poolTask(s, clock, "p-succeeded-29d", "SUCCEEDED", 100, 29);
    await poolTask(s, clock, "p-pending-400d", "PENDING", 400);
    await poolTask(s, clock, "p-running-400d", "RUNNING", 400);
    const vappIds = ["v-success-31d", "v-error-400d", "v-success-29d", "v-running-400d", "v-queued-400d"];
    await vappTask(s, clock, "v-success-31d", "success", 31);
    await vappTask(s, clock, "v-error-400d", "error", 400);
    await vappTask(s, clock, "v-success-29d", "success", 100, 29);
    await vappTask(s, clock, "v-running-400d", "running", 400);
    await vappTask(s, clock, "v-queued-400d", "queued", 400);
    const { logger, lines } = logLines();
    retention = new TaskRetention({ nodePools: s.compute, vapps: s.vapps }, clock, RETENTION, 60_000, logger);

    await retention.runOnce();
    expect(await poolTasksLeft(s)).toEqual(["p-pending-400d", "p-running-400d", "p-succeeded-29d"]);
    expect(await vappTasksLeft(s, vappIds)).toEqual(["v-success-29d", "v-running-400d", "v-queued-400d"]);
    expect(await s.compute.getTask("p-succeeded-31d")).toBeNull();
    const line = lines().find((l) => l.msg === "deleted finished tasks older than the retention period");
    expect(line).toMatchObject({ level: 30, nodePoolTasks: 2, vappTasks: 2, before: new Date(clock.now() - RETENTION).toISOString() });
    // The pools and vApps of deleted tasks stay as they were.
    expect(await s.compute.getNodePool("pool-p-succeeded-31d")).toMatchObject({ state: "RUNNING", activeTaskId: null });
    expect(await s.vapps.getVApp("vapp-v-error-400d")).toMatchObject({ taskId: "v-error-400d", status: VAPP_STATUS.POWERED_OFF });

    // Time passes: the next run deletes what has grown old since, and still no unfinished task.
    clock.advance(2 * DAY);
    await retention.runOnce();
    expect(await poolTasksLeft(s)).toEqual(["p-pending-400d", "p-running-400d"]);
    expect(await vappTasksLeft(s, vappIds)).toEqual(["v-running-400d", "v-queued-400d"]);
  });

  it("deletes a task that a worker really finished, once its finish is past the period, and leaves its pool free", async () => {
    const clock = new FakeClock();
    const s = await open();
    await poolTask(s, clock, "t1", "PENDING", 0);
    await s.compute.heartbeat("w1", clock.now(), clock.now());
    await s.compute.claimTask("w1", clock.now(), clock.now());
    clock.advance(DAY);
    await s.compute.finishTask("t1", "w1", (t, p) => ({
      task: { ...t, status: "SUCCEEDED", modifiedAt: clock.now() },
      pool: { ...p!, state: "RUNNING", activeTaskId: null, modifiedAt: clock.now() },
    }));
    retention = new TaskRetention({ nodePools: s.compute, vapps: s.vapps }, clock, RETENTION, 60_000, createLogger("silent"));
    // 30 days after its creation it finished only 29 days ago.
    clock.advance(RETENTION - DAY);
    await retention.runOnce();
    expect(await s.compute.getTask("t1")).not.toBeNull();
    clock.advance(DAY + 1);
    await retention.runOnce();
    expect(await s.compute.getTask("t1")).toBeNull();
    expect(await s.compute.getNodePool("pool-t1")).toMatchObject({ state: "RUNNING", activeTaskId: null });
    // The pool takes a new task as any idle pool does.
    const started = await s.compute.startPoolTask("pool-t1", (current) => ({
      pool: { ...current, activeTaskId: "t2", state: "DELETING" },
      task: { ...poolTaskRecord("t2", "pool-t1", "PENDING", clock.now(), clock.now()), command: "DeleteNodePool" },
    }));
    expect(started?.task.id).toBe("t2");
  });

  it("deletes a backlog larger than one piece in pieces, to the last task, of each store", async () => {
    const clock = new FakeClock();
    const s = await open();
    const old = TASK_PRUNE_PIECE * 2 + 17;
    for (let i = 0; i < old; i++) await poolTask(s, clock, `p${i}`, i % 2 === 0 ? "SUCCEEDED" : "FAILED", 40);
    await poolTask(s, clock, "p-new", "SUCCEEDED", 1);
    await vappTask(s, clock, "v-old", "success", 40);
    const nodePools = counting(s.compute);
    const vapps = counting(s.vapps);
    const before = clock.now() - RETENTION;
    expect(await pruneFinishedTasks(nodePools, before)).toBe(old);
    expect(nodePools.prunes).toBe(3);
    expect(await poolTasksLeft(s)).toEqual(["p-new"]);
    expect(await pruneFinishedTasks(vapps, before)).toBe(1);
    expect(vapps.prunes).toBe(1);
  });

  it("stops between pieces once asked to", async () => {
    const clock = new FakeClock();
    const s = await open();
    for (let i = 0; i < TASK_PRUNE_PIECE * 2; i++) await poolTask(s, clock, `p${i}`, "SUCCEEDED", 40);
    expect(await pruneFinishedTasks(s.compute, clock.now() - RETENTION, () => true)).toBe(TASK_PRUNE_PIECE);
    expect((await poolTasksLeft(s)).length).toBe(TASK_PRUNE_PIECE);
  });

  it("keeps everything with a retention of 0", async () => {
    const clock = new FakeClock();
    const s = await open();
    await poolTask(s, clock, "p-old", "SUCCEEDED", 3650);
    await vappTask(s, clock, "v-old", "error", 3650);
    const nodePools = counting(s.compute);
    const vapps = counting(s.vapps);
    retention = new TaskRetention({ nodePools, vapps }, clock, 0, 1, createLogger("silent"));
    retention.start();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await retention.runOnce();
    expect(nodePools.prunes + vapps.prunes).toBe(0);
    expect(await poolTasksLeft(s)).toEqual(["p-old"]);
    expect(await s.vapps.getVAppTask("v-old")).not.toBeNull();
  });

  it("runs at start, and logs a store that fails instead of throwing, then runs again at the next interval", async () => {
    const clock = new FakeClock();
    const s = await open();
    await poolTask(s, clock, "p-old", "SUCCEEDED", 40);
    let failures = 1;
    const flaky: FinishedTaskPruning = {
      pruneFinishedTasks: (before, limit) => (failures-- > 0 ? Promise.reject(new Error("database is locked")) : s.compute.pruneFinishedTasks(before, limit)),
    };
    const { logger, lines } = logLines();
    retention = new TaskRetention({ nodePools: flaky, vapps: s.vapps }, clock, RETENTION, 10, logger);
    retention.start();
    for (let i = 0; i < 100 && (await poolTasksLeft(s)).length > 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await poolTasksLeft(s)).toEqual([]);
    expect(lines().find((l) => l.msg === "deleting old finished tasks failed; retrying at the next interval")).toMatchObject({ level: 50, err: { message: "database is locked" } });
  });
});
