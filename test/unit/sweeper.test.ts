import type { Logger } from "pino";
import { describe, expect, it, vi } from "vitest";
import type { KeyManager } from "../../src/kms/key-manager.js";
import { StoreConnectionError } from "../../src/errors/store-unavailable.js";
import { Sweeper } from "../../src/kms/sweeper.js";

// A probe (2026-11-28): the sweep's destructions ran first and its rotations after them in one try, so a backlog of
// destructions delayed every due rotation until it was cleared, and destructions that failed at every interval (a
// scan cancelled by the statement timeout, a VACUUM waiting behind another's lock) left rotations undone for good.
describe("the key sweep", () => {
  function sweeperOf(manager: Partial<KeyManager>): { sweeper: Sweeper; logger: { warn: ReturnType<typeof vi.fn>; error: ReturnType<typeof vi.fn> } } {
    const logger = { warn: vi.fn(), error: vi.fn() };
    return { sweeper: new Sweeper(manager as KeyManager, 60_000, logger as unknown as Logger), logger };
  }

  it("rotates due keys first, and rotates them when the destructions fail", async () => {
    const calls: string[] = [];
    const { sweeper, logger } = sweeperOf({
      rotateDue: async () => {
        calls.push("rotate");
        return 1;
      },
      sweepDestroyed: async () => {
        calls.push("destroy");
        throw new TypeError("a scan that failed");
      },
      scrubErased: async () => true,
    });
    await sweeper.runOnce();
    await sweeper.runOnce();
    expect(calls).toEqual(["rotate", "destroy", "rotate", "destroy"]);
    expect(logger.error.mock.calls.map(([fields, msg]) => [(fields as { part: string }).part, msg])).toEqual([
      ["destructions", "key sweep failed (its destructions); retrying at the next interval"],
      ["destructions", "key sweep failed (its destructions); retrying at the next interval"],
    ]);
  });

  it("ends the run when the rotations meet the store's outage", async () => {
    const calls: string[] = [];
    const { sweeper, logger } = sweeperOf({
      rotateDue: async () => {
        calls.push("rotate");
        throw new StoreConnectionError(new Error("Query read timeout"));
      },
      sweepDestroyed: async () => {
        calls.push("destroy");
        return 0;
      },
      scrubErased: async () => true,
    });
    await sweeper.runOnce();
    expect(calls).toEqual(["rotate"]);
    expect(logger.warn).toHaveBeenCalledTimes(1);
  });

  it("carries out the destructions when the rotations fail", async () => {
    const swept: number[] = [];
    const { sweeper, logger } = sweeperOf({
      rotateDue: async () => {
        throw new TypeError("a rotation that failed");
      },
      // A backlog of 250 keys: batches of 100 until a batch is not full.
      sweepDestroyed: async () => {
        const batch = [100, 100, 50][swept.length] ?? 0;
        swept.push(batch);
        return batch;
      },
      scrubErased: async () => true,
    });
    await sweeper.runOnce();
    expect(swept).toEqual([100, 100, 50]);
    expect(logger.error).toHaveBeenCalledTimes(1);
    expect(logger.error.mock.calls[0]![1]).toBe("key sweep failed (its rotations); retrying at the next interval");
  });
});
