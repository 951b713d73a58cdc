import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { CreateNodePoolInput } from "../../src/compute/node-pools/node-pool-manager.js";
import { FakeClock } from "../support/fake-clock.js";
import { tempDir } from "../support/temp-dir.js";
import { computeStack, domainError, never } from "./compute-fixture.js";
import type { ComputeStack } from "./compute-fixture.js";

// The synchronous rules: everything is checked before a task exists, and a refused request leaves no pool and no
// task behind.
describe("NodePoolManager validation", () => {
  let dir: ReturnType<typeof tempDir>;
  let stack: ComputeStack;

  const create = (over: Partial<CreateNodePoolInput> = {}) =>
    stack.manager.create({
      serviceInstanceId: "vdc-a",
      clusterId: "cl-a1",
      computeFlavor: "cpu.small",
      name: "pool-1",
      count: 2,
      createdBy: "alice",
      ...over,
    });

  async function counts(): Promise<{ pools: number; tasks: number }> {
    const pools = (await stack.store.listNodePools("vdc-a", "cl-a1")).length + (await stack.store.listNodePools("vdc-a", "cl-a2")).length;
    const tasks = (await stack.store.listTasks("vdc-a", null, { limit: 1000, offset: 0 })).length;
    return { pools, tasks };
  }

  beforeEach(() => {
    dir = tempDir();
    stack = computeStack(dir.path, { clock: new FakeClock() });
  });

  afterEach(() => {
    stack.db.close();
    dir.remove();
  });

  it("creates the pool PROVISIONING with a PENDING task made by the caller", async () => {
    const task = await create();
    expect(task).toMatchObject({ command: "CreateNodePool", status: "PENDING", createdBy: "alice", serviceInstanceId: "vdc-a", clusterId: "cl-a1", attempts: 0 });
    const pool = await stack.manager.get("vdc-a", task.nodePoolId);
    expect(pool).toMatchObject({ name: "pool-1", count: 2, state: "PROVISIONING", activeTaskId: task.id, computeFlavor: "cpu.small" });
  });

  it("counts a missing count as 0 nodes", async () => {
    const task = await create({ count: undefined });
    expect((await stack.manager.get("vdc-a", task.nodePoolId)).count).toBe(0);
  });

  const badInput: [string, Partial<CreateNodePoolInput>, string, string][] = [
    ["a 2-character name", { name: "ab" }, "nodePoolName", "must be 3 to 20 lowercase Latin letters, digits and hyphens (^[a-z0-9-]{3,20}$), got \"ab\""],
    ["a 21-character name", { name: "a".repeat(21) }, "nodePoolName", `must be 3 to 20 lowercase Latin letters, digits and hyphens (^[a-z0-9-]{3,20}$), got "${"a".repeat(21)}"`],
    ["a name of 4 MB, quoted cut short", { name: "n".repeat(4_000_000) }, "nodePoolName", `must be 3 to 20 lowercase Latin letters, digits and hyphens (^[a-z0-9-]{3,20}$), got "${"n".repeat(64)}..."`],
    ["an upper-case name", { name: "Upper" }, "nodePoolName", "must be 3 to 20 lowercase Latin letters, digits and hyphens (^[a-z0-9-]{3,20}$), got \"Upper\""],
    ["an underscore", { name: "under_score" }, "nodePoolName", "must be 3 to 20 lowercase Latin letters, digits and hyphens (^[a-z0-9-]{3,20}$), got \"under_score\""],
    ["no name", { name: "" }, "nodePoolName", "is required; it must be 3 to 20 lowercase Latin letters, digits and hyphens (^[a-z0-9-]{3,20}$)"],
    ["no flavor", { computeFlavor: "" }, "nodeConfig.computeFlavor", "is required"],
    ["an unknown flavor", { computeFlavor: "cpu.huge" }, "nodeConfig.computeFlavor", `unknown compute flavor "cpu.huge"; known: cpu.small, gpu.sold-out`],
    ["a negative count", { count: -1 }, "scalePolicy.fixedScale.count", "must be between 0 and 20, got -1"],
    ["a count above the largest pool", { count: 21 }, "scalePolicy.fixedScale.count", "must be between 0 and 20 (the cluster's largest pool size), got 21"],
    ["no cluster", { clusterId: "" }, "clusterId", "is required"],
  ];

  it.each(badInput)("refuses %s with INVALID_ARGUMENT naming the field", async (_, over, field, description) => {
    const error = await domainError(() => create(over));
    expect(error).toMatchObject({ code: "invalid_argument", reason: "REQUEST_INVALID", domain: "compute", violations: [{ field, description }] });
    expect(await counts()).toEqual({ pools: 0, tasks: 0 });
  });

  it("reports every bad field at once", async () => {
    const error = await domainError(() => create({ name: "X", computeFlavor: "", count: -5 }));
    expect(error.code === "invalid_argument" && error.violations.map((v) => v.field)).toEqual([
      "nodeConfig.computeFlavor",
      "nodePoolName",
      "scalePolicy.fixedScale.count",
    ]);
  });

  it("answers NOT_FOUND for an unknown service instance or a cluster of another one", async () => {
    expect(await domainError(() => create({ serviceInstanceId: "vdc-x" }))).toMatchObject({ code: "not_found", reason: "SERVICE_INSTANCE_NOT_FOUND" });
    expect(await domainError(() => create({ serviceInstanceId: "vdc-b" }))).toMatchObject({
      code: "not_found",
      reason: "CLUSTER_NOT_FOUND",
      resource: { resourceType: "cluster", resourceName: "cl-a1", owner: "vdc-b" },
    });
    expect(await domainError(() => stack.manager.list("vdc-a", "cl-zz"))).toMatchObject({ reason: "CLUSTER_NOT_FOUND" });
    expect(await counts()).toEqual({ pools: 0, tasks: 0 });
  });

  it("keeps names unique within a cluster, not across clusters", async () => {
    const first = await create();
    expect(await domainError(() => create())).toMatchObject({
      code: "already_exists",
      reason: "NODE_POOL_NAME_TAKEN",
      resource: { resourceName: first.nodePoolId, owner: "cl-a1" },
    });
    await create({ clusterId: "cl-a2" });
    expect(await counts()).toEqual({ pools: 2, tasks: 2 });
  });

  it("refuses a second change while a task of the pool is unfinished", async () => {
    const task = await create();
    const busy = await domainError(() => stack.manager.update({ serviceInstanceId: "vdc-a", nodePoolId: task.nodePoolId, name: "", count: 3, createdBy: "bob" }));
    expect(busy).toMatchObject({
      code: "failed_precondition",
      reason: "NODE_POOL_TASK_IN_PROGRESS",
      metadata: { taskId: task.id, nodePoolId: task.nodePoolId },
      violations: [{ type: "STATE", subject: `nodePools/${task.nodePoolId}` }],
    });
    expect(await domainError(() => stack.manager.delete({ serviceInstanceId: "vdc-a", nodePoolId: task.nodePoolId, createdBy: "bob" }))).toMatchObject({
      reason: "NODE_POOL_TASK_IN_PROGRESS",
    });
    expect(await counts()).toEqual({ pools: 1, tasks: 1 });
  });

  describe("of updates", () => {
    // Runs the pools' tasks to the end so that they can be changed again.
    async function settled(name: string): Promise<string> {
      const task = await create({ name });
      stack.worker.start();
      await stack.tasks.wait("vdc-a", task.id, durationFromMs(5000), never());
      return task.nodePoolId;
    }

    afterEach(() => stack.worker.stop());

    it("holds a pending new name: nobody else may take it, and the pool keeps its name until the task ends", async () => {
      const a = await settled("pool-a");
      await stack.worker.stop();
      const renaming = await stack.manager.update({ serviceInstanceId: "vdc-a", nodePoolId: a, name: "pool-new", count: undefined, createdBy: "bob" });
      expect(renaming.change).toEqual({ name: "pool-new", count: null, stateIfFailed: "RUNNING" });
      expect(await stack.manager.get("vdc-a", a)).toMatchObject({ name: "pool-a", pendingName: "pool-new", state: "RECONCILING" });
      expect(await domainError(() => create({ name: "pool-new" }))).toMatchObject({ reason: "NODE_POOL_NAME_TAKEN", resource: { resourceName: a } });
    });

    it("checks the new name, the count against the pool's cluster, and that there is something to change", async () => {
      const a = await settled("pool-a");
      const b = await settled("pool-b");
      const update = (name: string, count: number | undefined, nodePoolId = a) =>
        domainError(() => stack.manager.update({ serviceInstanceId: "vdc-a", nodePoolId, name, count, createdBy: "bob" }));
      expect(await update("pool-b", undefined)).toMatchObject({ reason: "NODE_POOL_NAME_TAKEN", resource: { resourceName: b } });
      expect(await update("Bad", undefined)).toMatchObject({ code: "invalid_argument", violations: [{ field: "nodePoolName" }] });
      expect(await update("", 21)).toMatchObject({ violations: [{ field: "scalePolicy.fixedScale.count", description: "must be between 0 and 20 (the cluster's largest pool size), got 21" }] });
      expect(await update("", undefined)).toMatchObject({
        violations: [{ field: "nodePoolName", description: "nothing to update: give nodePoolName, scalePolicy.fixedScale.count or both" }],
      });
      expect(await update("", 1, "no-such-pool")).toMatchObject({ code: "not_found", reason: "NODE_POOL_NOT_FOUND" });
      // A pool is found only under its own service instance.
      expect(await domainError(() => stack.manager.get("vdc-b", a))).toMatchObject({ reason: "NODE_POOL_NOT_FOUND" });
    });
  });
});
