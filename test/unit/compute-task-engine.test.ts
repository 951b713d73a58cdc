import { Writable } from "node:stream";
import { create as createMessage } from "@bufbuild/protobuf";
import { DurationSchema, durationFromMs } from "@bufbuild/protobuf/wkt";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { NodePoolSpec } from "../../src/compute/node-pools/node-pool-model.js";
import type { NodePoolProvider } from "../../src/compute/node-pools/provider.js";
import type { TaskClaim } from "../../src/storage/node-ledger.js";
import { SimulatedProvider } from "../../src/compute/node-pools/simulated-provider.js";
import type { TaskRecord } from "../../src/compute/tasks/task-model.js";
import { createLogger } from "../../src/logger.js";
import { FakeClock } from "../support/fake-clock.js";
import { logLines } from "../support/log-lines.js";
import { tempDir } from "../support/temp-dir.js";
import { computeStack, domainError, never, reservedIn, testCatalog } from "./compute-fixture.js";
import type { ComputeStack } from "./compute-fixture.js";

// A provider that holds every call until the test lets it go or the worker aborts it.
class HeldProvider implements NodePoolProvider {
  readonly calls: string[] = [];
  private release = (): void => {};
  private readonly released = new Promise<void>((resolve) => (this.release = resolve));

  async apply(spec: NodePoolSpec, _claim: TaskClaim, signal: AbortSignal): Promise<void> {
    this.calls.push(spec.nodePoolId);
    await new Promise<void>((resolve, reject) => {
      void this.released.then(resolve);
      signal.addEventListener("abort", () => reject(signal.reason));
    });
  }

  remove(spec: NodePoolSpec, claim: TaskClaim, signal: AbortSignal): Promise<void> {
    return this.apply(spec, claim, signal);
  }

  letGo(): void {
    this.release();
  }
}

describe("node pool tasks", () => {
  let dir: ReturnType<typeof tempDir>;
  let clock: FakeClock;
  let stack: ComputeStack;
  const opened: ComputeStack[] = [];

  function open(opts: Omit<Parameters<typeof computeStack>[1], "clock"> = {}): ComputeStack {
    const s = computeStack(dir.path, { clock, ...opts });
    opened.push(s);
    return s;
  }

  const create = (s: ComputeStack, name: string, count: number, clusterId = "cl-a1", computeFlavor = "cpu.small") =>
    s.manager.create({ serviceInstanceId: "vdc-a", clusterId, computeFlavor, name, count, createdBy: "alice" });
  const update = (s: ComputeStack, nodePoolId: string, name: string, count: number | undefined) =>
    s.manager.update({ serviceInstanceId: "vdc-a", nodePoolId, name, count, createdBy: "bob" });
  const wait = (s: ComputeStack, task: TaskRecord, timeoutMs = 5000) => s.tasks.wait("vdc-a", task.id, durationFromMs(timeoutMs), never());

  beforeEach(() => {
    dir = tempDir();
    clock = new FakeClock();
    stack = open();
  });

  afterEach(async () => {
    for (const s of opened.splice(0)) {
      if (s.db.open) s.db.close();
    }
    dir.remove();
  });

  it("runs create, rename and rescale, and delete to the end", async () => {
    stack.worker.start();
    const created = await wait(stack, await create(stack, "pool-1", 3));
    expect(created).toMatchObject({ status: "SUCCEEDED", attempts: 1, failure: null, result: { name: "pool-1", count: 3, state: "RUNNING", activeTaskId: null } });
    expect(await stack.ledger.get(created.nodePoolId)).toMatchObject({ reserved: 3, ready: 3 });

    clock.advance(1000);
    const updated = await wait(stack, await update(stack, created.nodePoolId, "pool-2", 5));
    expect(updated).toMatchObject({ status: "SUCCEEDED", modifiedAt: clock.now(), result: { name: "pool-2", count: 5, state: "RUNNING" } });
    expect(await stack.manager.get("vdc-a", created.nodePoolId)).toMatchObject({ name: "pool-2", count: 5, pendingName: null, state: "RUNNING" });
    // The old name is free again.
    await create(stack, "pool-1", 0);

    const deleted = await wait(stack, await stack.manager.delete({ serviceInstanceId: "vdc-a", nodePoolId: created.nodePoolId, createdBy: "carol" }));
    expect(deleted).toMatchObject({ status: "SUCCEEDED", result: null, createdBy: "carol" });
    expect(await domainError(() => stack.manager.get("vdc-a", created.nodePoolId))).toMatchObject({ reason: "NODE_POOL_NOT_FOUND" });
    expect(await stack.ledger.get(created.nodePoolId)).toBeNull();

    const history = await stack.tasks.list("vdc-a", created.nodePoolId, { limit: 0, offset: 0 });
    expect(history.map((t) => t.command)).toEqual(["DeleteNodePool", "UpdateNodePool", "CreateNodePool"]);
    await stack.worker.stop();
  });

  it("fails a create above the free capacity with RESOURCE_EXHAUSTED and leaves the pool in ERROR, fixable by an update", async () => {
    stack.worker.start();
    await wait(stack, await create(stack, "big", 7));
    const failed = await wait(stack, await create(stack, "too-big", 4));
    expect(failed.status).toBe("FAILED");
    expect(failed.failure).toEqual({
      kind: "domain",
      error: {
        code: "resource_exhausted",
        reason: "NODE_CAPACITY_EXHAUSTED",
        domain: "compute",
        message: `cluster cl-a1 has room for 3 more nodes (capacity 10) and node pool ${failed.nodePoolId} asks for 4; lower scalePolicy.fixedScale.count or free nodes in other pools`,
        metadata: { clusterId: "cl-a1", capacity: "10", free: "3", requested: "4" },
        violations: [{ subject: "clusters/cl-a1", description: "node capacity 10, 3 free, 4 requested" }],
      },
    });
    // It has no nodes, and says so: a rename needs none (it asked for the 4 and failed again until 2026-11-28).
    expect(await stack.manager.get("vdc-a", failed.nodePoolId)).toMatchObject({ state: "ERROR", count: 0, activeTaskId: null });
    expect(await stack.ledger.get(failed.nodePoolId)).toBeNull();
    const renamed = await wait(stack, await update(stack, failed.nodePoolId, "renamed", undefined));
    expect(renamed).toMatchObject({ status: "SUCCEEDED", result: { name: "renamed", state: "RUNNING", count: 0 } });
    expect(reservedIn(stack.db, "cl-a1")).toBe(7);

    const fixed = await wait(stack, await update(stack, failed.nodePoolId, "", 3));
    expect(fixed).toMatchObject({ status: "SUCCEEDED", result: { state: "RUNNING", count: 3 } });
    expect(reservedIn(stack.db, "cl-a1")).toBe(10);
    await stack.worker.stop();
  });

  it("keeps a pool RUNNING with its old size when a scale-up fails, and always lets it shrink", async () => {
    stack.worker.start();
    await wait(stack, await create(stack, "big", 8));
    const small = await wait(stack, await create(stack, "small", 1));
    const failed = await wait(stack, await update(stack, small.nodePoolId, "renamed", 5));
    expect(failed).toMatchObject({ status: "FAILED", failure: { error: { reason: "NODE_CAPACITY_EXHAUSTED" } } });
    expect(await stack.manager.get("vdc-a", small.nodePoolId)).toMatchObject({ name: "small", count: 1, state: "RUNNING", pendingName: null });
    const shrunk = await wait(stack, await update(stack, small.nodePoolId, "", 0));
    expect(shrunk.result).toMatchObject({ count: 0, state: "RUNNING" });
    expect(reservedIn(stack.db, "cl-a1")).toBe(8);
    await stack.worker.stop();
  });

  it("fails a flavor the catalog marks unavailable with UNAVAILABLE and a retry delay", async () => {
    stack.worker.start();
    const failed = await wait(stack, await create(stack, "gpus", 1, "cl-a1", "gpu.sold-out"));
    expect(failed.failure).toMatchObject({ kind: "domain", error: { code: "unavailable", reason: "COMPUTE_FLAVOR_UNAVAILABLE", retryAfterSeconds: 300 } });
    // Without new nodes the flavor does not matter: an empty pool of it is fine.
    const empty = await wait(stack, await create(stack, "no-gpus", 0, "cl-a1", "gpu.sold-out"));
    expect(empty.status).toBe("SUCCEEDED");
    await stack.worker.stop();
  });

  it("reports a provider fault as INTERNAL and logs it with the task id", async () => {
    let logs = "";
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        logs += chunk.toString();
        callback();
      },
    });
    const faulty: NodePoolProvider = {
      apply: () => Promise.reject(new Error("provider exploded")),
      remove: () => Promise.reject(new Error("provider exploded")),
    };
    const s = open({ provider: () => faulty, logger: createLogger("error", sink) });
    s.worker.start();
    const failed = await wait(s, await create(s, "pool-1", 1));
    expect(failed).toMatchObject({ status: "FAILED", failure: { kind: "internal" } });
    expect(await s.manager.get("vdc-a", failed.nodePoolId)).toMatchObject({ state: "ERROR" });
    expect(logs).toContain(failed.id);
    expect(logs).toContain("provider exploded");
    await s.worker.stop();
  });

  describe("WaitTask", () => {
    it("answers at once for a done task, on the finish of a running one, and on its timeout", async () => {
      const held = new HeldProvider();
      const s = open({ provider: () => held });
      s.worker.start();
      const task = await create(s, "pool-1", 1);
      const started = performance.now();
      const early = await wait(s, task, 50);
      expect(performance.now() - started).toBeGreaterThanOrEqual(45);
      expect(early.status).toBe("RUNNING");
      expect(s.notifier.size).toBe(0);

      const waiting = wait(s, task, 10_000);
      await sleep(20);
      expect(s.notifier.size).toBe(1);
      held.letGo();
      expect((await waiting).status).toBe("SUCCEEDED");
      expect(s.notifier.size).toBe(0);

      const again = performance.now();
      expect((await wait(s, task, 10_000)).status).toBe("SUCCEEDED");
      expect(performance.now() - again).toBeLessThan(1000);
      await s.worker.stop();
    });

    it("gives up when the caller goes away or the server stops", async () => {
      const held = new HeldProvider();
      const s = open({ provider: () => held });
      s.worker.start();
      const task = await create(s, "pool-1", 1);
      const caller = new AbortController();
      const abandoned = s.tasks.wait("vdc-a", task.id, durationFromMs(10_000), caller.signal);
      caller.abort();
      expect((await abandoned).status).toBe("RUNNING");

      const pending = wait(s, task, 10_000);
      s.notifier.close();
      expect((await pending).status).toBe("RUNNING");
      expect((await wait(s, task, 10_000)).status).toBe("RUNNING");
      await s.worker.stop();
    });

    it("checks the timeout and finds tasks only under their own service instance", async () => {
      const task = await create(stack, "pool-1", 1);
      const timeout = (seconds: bigint, nanos: number) => createMessage(DurationSchema, { seconds, nanos });
      expect(await domainError(() => stack.tasks.wait("vdc-a", task.id, timeout(60n, 1_000_000), never()))).toMatchObject({
        code: "invalid_argument",
        violations: [{ field: "timeout", description: "must be between 0s and 60s, got 60.001s" }],
      });
      expect(await domainError(() => stack.tasks.wait("vdc-a", task.id, timeout(0n, -1_000_000), never()))).toMatchObject({
        violations: [{ field: "timeout", description: "must be between 0s and 60s, got -0.001s" }],
      });
      // To the nanosecond, as the Duration was written.
      expect(await domainError(() => stack.tasks.wait("vdc-a", task.id, timeout(60n, 999_999_999), never()))).toMatchObject({
        violations: [{ field: "timeout", description: "must be between 0s and 60s, got 60.999999999s" }],
      });
      // Not a Duration at all, as only the binary form can send it: nanos of another sign than the seconds, or a
      // whole second of them. Refused as such, not waited for as 0.999999999s or 2s.
      for (const [seconds, nanos] of [[1n, -1], [0n, 2_000_000_000], [-1n, 500_000_000]] as const) {
        expect(await domainError(() => stack.tasks.wait("vdc-a", task.id, timeout(seconds, nanos), never()))).toMatchObject({
          violations: [{ field: "timeout", description: "is not a valid Duration: nanos must be below one second, of the same sign as seconds" }],
        });
      }
      expect((await stack.tasks.wait("vdc-a", task.id, timeout(0n, 0), never())).status).toBe("PENDING");
      expect(await domainError(() => stack.tasks.get("vdc-b", task.id))).toMatchObject({ code: "not_found", reason: "TASK_NOT_FOUND" });
      expect(await domainError(() => stack.tasks.get("vdc-zz", task.id))).toMatchObject({ reason: "SERVICE_INSTANCE_NOT_FOUND" });
      expect(await domainError(() => stack.tasks.list("vdc-a", "", { limit: 1001, offset: -1 }))).toMatchObject({
        violations: [{ field: "page.limit" }, { field: "page.offset" }],
      });
    });
  });

  describe("after a stop or a crash", () => {
    it("resumes a task whose worker died once its lease runs out, on the same database file", async () => {
      const held = new HeldProvider();
      const crashed = open({ provider: () => held });
      crashed.worker.start();
      const task = await create(crashed, "pool-1", 2);
      await expect.poll(() => held.calls.length).toBe(1);
      // The crashed worker never beats again and never finishes; a new process opens the same file.
      crashed.db.close();

      const restarted = open({ worker: { leaseMs: 5000 } });
      restarted.worker.start();
      expect((await restarted.tasks.wait("vdc-a", task.id, durationFromMs(0), never())).status).toBe("RUNNING");
      clock.advance(5001);
      restarted.worker.kick();
      const done = await wait(restarted, task);
      expect(done).toMatchObject({ status: "SUCCEEDED", attempts: 2, result: { state: "RUNNING", count: 2 } });
      // Resuming is not a change callers see: modifiedAt is that of PENDING -> RUNNING and of the end.
      expect(done.modifiedAt).toBe(clock.now());
      await restarted.worker.stop();
    });

    // A probe froze a server (SIGSTOP) past its lease on PostgreSQL: another took the task over, finished it and
    // deleted the pool; the first woke, wrote its nodes back and held the cluster's capacity for good (2026-11-28).
    it("a worker silent past its lease stops writing once another took its task over", async () => {
      const stalled = open({ provider: (ledger) => new SimulatedProvider(ledger, testCatalog, { delayPerNodeMs: 250 }) });
      stalled.worker.start();
      const task = await create(stalled, "pool-1", 4);
      await expect.poll(async () => (await stalled.ledger.get(task.nodePoolId))?.ready ?? 0).toBeGreaterThanOrEqual(1);
      // Its heartbeat (written once, at start) is now past the lease: another worker resumes the task.
      clock.advance(5001);
      const other = open();
      other.worker.start();
      expect(await wait(other, task)).toMatchObject({ status: "SUCCEEDED", attempts: 2 });
      const deleted = await other.manager.delete({ serviceInstanceId: "vdc-a", nodePoolId: task.nodePoolId, createdBy: "bob" });
      expect(await wait(other, deleted)).toMatchObject({ status: "SUCCEEDED" });
      expect(await other.ledger.get(task.nodePoolId)).toBeNull();
      // The first worker's run would have brought its last nodes up by now (250 ms each), and settled the pool at 4.
      await sleep(1200);
      expect(await other.ledger.get(task.nodePoolId)).toBeNull();
      expect(reservedIn(other.db, "cl-a1")).toBe(0);
      await other.worker.stop();
      await stalled.worker.stop();
    });

    // A probe of the clock (2026-11-28): after a step back the time since the last beat read negative, and no beat was
    // written for as long as the step, so that on a shared store the live worker's tasks looked orphaned.
    it("beats at once when the clock stepped back", async () => {
      const stack = open();
      stack.worker.start();
      await expect.poll(() => stack.db.prepare("SELECT heartbeat_at FROM compute_workers").pluck().get()).toBe(clock.now());
      clock.advance(-3_600_000);
      stack.worker.kick();
      await expect.poll(() => stack.db.prepare("SELECT heartbeat_at FROM compute_workers").pluck().get()).toBe(clock.now());
      await stack.worker.stop();
    });

    // Two probes (2026-11-28): a run that failed on the store for a moment (a full disk, a dropped connection) left its
    // task RUNNING, held by the live worker, its pool locked against every change, until the server restarted.
    it("runs a task again when its run failed on the store, instead of holding it until a restart", async () => {
      const held = new HeldProvider();
      const log = logLines();
      const s = open({ provider: () => held, logger: log.logger });
      s.worker.start();
      const task = await create(s, "pool-1", 2);
      await expect.poll(() => held.calls.length).toBe(1);
      s.db.exec("CREATE TRIGGER failing BEFORE UPDATE ON compute_tasks BEGIN SELECT RAISE(ABORT, 'injected storage failure'); END");
      held.letGo();
      await expect.poll(() => log.lines().some((l) => l.msg === "task run failed; this server runs it again")).toBe(true);
      s.db.exec("DROP TRIGGER failing");
      expect((await s.tasks.get("vdc-a", task.id)).status).toBe("RUNNING");
      clock.advance(1000);
      s.worker.kick();
      expect(await wait(s, task)).toMatchObject({ status: "SUCCEEDED", attempts: 1 });
      expect(held.calls.length).toBe(2);
      await s.worker.stop();
    });

    it("resumes at once after a clean stop, and the provider carries on from the nodes already up", async () => {
      const slow = open({ provider: (ledger) => new SimulatedProvider(ledger, testCatalog, { delayPerNodeMs: 30 }) });
      slow.worker.start();
      const task = await create(slow, "pool-1", 4);
      await expect.poll(async () => (await slow.ledger.get(task.nodePoolId))?.ready ?? 0).toBeGreaterThanOrEqual(1);
      await slow.worker.stop();
      const placed = await slow.ledger.get(task.nodePoolId);
      expect(placed?.reserved).toBe(4);
      expect(placed?.ready).toBeLessThan(4);
      expect((await slow.tasks.get("vdc-a", task.id)).status).toBe("RUNNING");

      const next = open();
      next.worker.start();
      expect(await wait(next, task)).toMatchObject({ status: "SUCCEEDED", attempts: 2 });
      expect(await next.ledger.get(task.nodePoolId)).toMatchObject({ reserved: 4, ready: 4 });
      await next.worker.stop();
    });
  });

  it("runs 200 concurrent creates on one cluster with two workers: capacity holds, each task runs once", async () => {
    const runs = new Map<string, number>();
    let peak = 0;
    // Each worker has its own connection, as two server processes would; the provider interleaves them.
    const counting = (ledger: ComputeStack["ledger"], db: ComputeStack["db"]): NodePoolProvider => {
      const simulated = new SimulatedProvider(ledger, testCatalog, { delayPerNodeMs: 0 });
      return {
        async apply(spec, claim, signal) {
          runs.set(spec.nodePoolId, (runs.get(spec.nodePoolId) ?? 0) + 1);
          await sleep(Math.random() * 3);
          await simulated.apply(spec, claim, signal);
          peak = Math.max(peak, reservedIn(db, spec.clusterId));
        },
        remove: (spec, claim, signal) => simulated.remove(spec, claim, signal),
      };
    };
    const one = open({ provider: counting, worker: { concurrency: 8 } });
    const two = open({ provider: counting, worker: { concurrency: 8 } });
    one.worker.start();
    two.worker.start();
    const counts = Array.from({ length: 200 }, (_, i) => i % 4);
    const tasks = await Promise.all(counts.map((count, i) => create(i % 2 === 0 ? one : two, `pool-${i}`, count)));
    // Waiting through one stack sees the tasks the other finished: the store is the source of truth.
    const done = await Promise.all(tasks.map((t) => pollDone(one, t)));

    expect(done.every((t) => t.attempts === 1)).toBe(true);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(runs.size).toBe(200);
    const pools = await one.store.listNodePools("vdc-a", "cl-a1");
    const running = pools.filter((p) => p.state === "RUNNING");
    expect(running.length + pools.filter((p) => p.state === "ERROR").length).toBe(200);
    for (const t of done.filter((d) => d.status === "FAILED")) expect(t.failure).toMatchObject({ error: { reason: "NODE_CAPACITY_EXHAUSTED" } });
    const used = running.reduce((sum, p) => sum + p.count, 0);
    expect(used).toBeLessThanOrEqual(10);
    expect(reservedIn(one.db, "cl-a1")).toBe(used);
    expect(peak).toBeLessThanOrEqual(10);
    // Capacity is used up: anything that failed needed more than what was left.
    expect(used).toBeGreaterThanOrEqual(8);
    await one.worker.stop();
    await two.worker.stop();
  });
});

// A finish recorded by the other worker wakes only that worker's waiters (another process, in production), so
// the test reads the store until the task is done.
async function pollDone(s: ComputeStack, task: TaskRecord): Promise<TaskRecord> {
  for (;;) {
    const current = await s.tasks.get("vdc-a", task.id);
    if (current.status === "SUCCEEDED" || current.status === "FAILED") return current;
    await sleep(5);
  }
}
