import type { Logger } from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { TaskWorker } from "../../src/compute/tasks/task-worker.js";
import { StoreConnectionError, failureLevel } from "../../src/errors/store-unavailable.js";
import { systemClock } from "../../src/shared/clock.js";
import type { QueuedTask, TaskQueue } from "../../src/storage/task-queue.js";

// During a database outage the background jobs (the key sweep, the retentions, the task worker) logged at error
// level, with stacks, every interval: the task worker once a second (a probe, 2026-11-28). An outage of the store is
// logged at warn, the task worker's at most ten times a minute; any other failure stays an error.
describe("failures of background work", () => {
  it("are warnings when the store is out for now, errors otherwise", () => {
    expect(failureLevel(new StoreConnectionError(new Error("Query read timeout")))).toBe("warn");
    expect(failureLevel(Object.assign(new Error("canceling statement due to statement timeout"), { code: "57014", severity: "ERROR" }))).toBe("warn");
    expect(failureLevel(new TypeError("a fault of ours"))).toBe("error");
  });

  describe("of the task worker, whose store is out", () => {
    beforeEach(() => vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "setTimeout", "clearTimeout", "performance", "Date"] }));
    afterEach(() => vi.useRealTimers());

    it("are logged at warn, at most ten a minute, where it tries every second", async () => {
      const out = async (): Promise<never> => {
        throw new StoreConnectionError(new Error("Connection terminated unexpectedly"));
      };
      const store: TaskQueue<QueuedTask> = { heartbeat: out, retireWorker: async () => {}, claimTask: out };
      const logger = { warn: vi.fn(), error: vi.fn(), info: vi.fn() };
      const worker = new TaskWorker(store, async () => {}, systemClock, logger as unknown as Logger, {
        workerId: "w",
        concurrency: 1,
        heartbeatMs: 1000,
        leaseMs: 10_000,
      });
      worker.start();
      await vi.advanceTimersByTimeAsync(59_500);
      expect([logger.warn.mock.calls.length, logger.error.mock.calls.length]).toEqual([10, 0]);
      await worker.stop();
    });
  });
});
