import type { Logger } from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { AccessPolicy } from "../../src/identity/access-policy.js";
import { AccessWatcher } from "../../src/identity/access-watcher.js";
import type { Authenticator } from "../../src/identity/authenticator.js";
import { StoreConnectionError } from "../../src/errors/store-unavailable.js";
import { systemClock } from "../../src/shared/clock.js";
import type { IdentityStore } from "../../src/storage/identity-store.js";

// The watcher reads the store's access generation every second. With PostgreSQL silent, each read waits for its
// statement timeout: one a second piled up until they held every connection of the pool, and each failure logged a
// line (a probe of outages, 2026-11-28).
describe("AccessWatcher with a store that does not answer", () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "setTimeout", "clearTimeout", "performance", "Date"] }));
  afterEach(() => vi.useRealTimers());

  const watcherOf = (generation: () => Promise<number>) => {
    const store = { generation: vi.fn(generation), deleteExpiredAccessTokens: vi.fn(async () => 0) };
    const logger = { warn: vi.fn(), error: vi.fn() };
    const watcher = new AccessWatcher(
      store as unknown as IdentityStore,
      { clear: () => {} } as unknown as Authenticator,
      { clear: () => {} } as unknown as AccessPolicy,
      systemClock,
      logger as unknown as Logger,
    );
    return { watcher, store, logger };
  };

  it("reads once while a read is outstanding, not once a second", async () => {
    let answer = (_generation: number): void => {};
    const { watcher, store } = watcherOf(() => new Promise<number>((resolve) => (answer = resolve)));
    watcher.start();
    await vi.advanceTimersByTimeAsync(5_500);
    expect(store.generation).toHaveBeenCalledTimes(1);
    answer(1);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(store.generation).toHaveBeenCalledTimes(2);
    answer(1);
    await watcher.stop();
  });

  it("says the store is down once a minute, at warn; a fault of another kind each time, at error", async () => {
    const { watcher, logger } = watcherOf(async () => {
      throw new StoreConnectionError(new Error("Query read timeout"));
    });
    watcher.start();
    await vi.advanceTimersByTimeAsync(30_500);
    expect([logger.warn.mock.calls.length, logger.error.mock.calls.length]).toEqual([1, 0]);
    // The first line came at 1 s; the next minute starts at 61 s.
    await vi.advanceTimersByTimeAsync(31_000);
    expect([logger.warn.mock.calls.length, logger.error.mock.calls.length]).toEqual([2, 0]);
    await watcher.stop();

    const broken = watcherOf(async () => {
      throw new TypeError("a fault of ours");
    });
    broken.watcher.start();
    await vi.advanceTimersByTimeAsync(3_500);
    expect([broken.logger.warn.mock.calls.length, broken.logger.error.mock.calls.length]).toEqual([0, 3]);
    await broken.watcher.stop();
  });
});
