import { RateLimiterMemory } from "rate-limiter-flexible";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { FailureLimiter } from "../../src/identity/failure-limiter.js";
import { MemoryRateLimiter } from "../../src/ratelimit/memory-rate-limiter.js";
import { rateClassOf } from "../../src/ratelimit/rate-limits.js";

// rate-limiter-flexible's RateLimiterMemory reads Date.now(): these tests fake Date alone (timers stay real unless a
// test says otherwise), so that time stands still until the test moves it and the numbers are exact.
beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date"], now: Date.parse("2026-01-01T00:00:00Z") });
});
afterEach(() => {
  vi.useRealTimers();
});

function advance(ms: number): void {
  vi.setSystemTime(Date.now() + ms);
}

describe("MemoryRateLimiter", () => {
  const limits = { GET: { perMinute: 3, perDay: 5 }, POST: { perMinute: 1, perDay: 10 } };

  it("opens a window at a key's first call and starts afresh when it ends", async () => {
    const limiter = new MemoryRateLimiter({ GET: { perMinute: 2, perDay: 100 }, POST: limits.POST });
    const take = async (key: string) => (await limiter.take("GET", key))!.shown;
    expect(await take("a")).toEqual({ window: "minute", limit: 2, remaining: 1, resetMs: 60_000 });
    advance(40_000);
    expect(await take("a")).toEqual({ window: "minute", limit: 2, remaining: 0, resetMs: 20_000 });
    advance(19_999);
    expect(await take("a")).toEqual({ window: "minute", limit: 2, remaining: 0, resetMs: 1 });
    expect(await take("b")).toEqual({ window: "minute", limit: 2, remaining: 1, resetMs: 60_000 });
    advance(1);
    expect(await take("a")).toEqual({ window: "minute", limit: 2, remaining: 1, resetMs: 60_000 });
  });

  // A probe of the clock (2026-11-28): the library's memory store tells the time left from the wall clock, and after
  // a step back of an hour a minute's refusal said Retry-After: 3660.
  it("never tells more time left than the window's length after the clock stepped back", async () => {
    const limiter = new MemoryRateLimiter(limits);
    expect((await limiter.take("POST", "k"))!.allowed).toBe(true);
    advance(-3_600_000);
    expect(await limiter.take("POST", "k")).toEqual({ allowed: false, shown: { window: "minute", limit: 1, remaining: 0, resetMs: 60_000 } });
    const failures = new FailureLimiter(1, "step-back");
    expect(await failures.fail("10.0.0.1")).toBe(0);
    expect(await failures.fail("10.0.0.1")).toBe(60);
    advance(-3_600_000);
    expect(await failures.blockedFor("10.0.0.1")).toBe(60);
    expect(await failures.fail("10.0.0.1")).toBe(60);
  });

  it("refuses by the minute without spending the day, and by the day in a fresh minute", async () => {
    const limiter = new MemoryRateLimiter(limits);
    const take = () => limiter.take("GET", "k");
    expect((await Promise.all([take(), take(), take()])).map((d) => [d!.allowed, d!.shown.window, d!.shown.remaining])).toEqual([
      [true, "minute", 2],
      [true, "minute", 1],
      [true, "minute", 0],
    ]);
    expect(await take()).toEqual({ allowed: false, shown: { window: "minute", limit: 3, remaining: 0, resetMs: 60_000 } });
    expect((await take())!.allowed).toBe(false);
    advance(60_000);
    // Two of the day's five are left (the refused calls did not count): the day is the window shown.
    expect(await take()).toEqual({ allowed: true, shown: { window: "day", limit: 5, remaining: 1, resetMs: 86_400_000 - 60_000 } });
    expect((await take())!.allowed).toBe(true);
    expect(await take()).toEqual({ allowed: false, shown: { window: "day", limit: 5, remaining: 0, resetMs: 86_400_000 - 60_000 } });
    // The next day starts afresh.
    advance(86_400_000);
    expect(await take()).toEqual({ allowed: true, shown: { window: "minute", limit: 3, remaining: 2, resetMs: 60_000 } });
  });

  it("shows the window that holds the caller back longest: the spent day in the minute's refusals too", async () => {
    const limiter = new MemoryRateLimiter({ GET: { perMinute: 3, perDay: 2 }, POST: limits.POST });
    const take = () => limiter.take("GET", "k");
    const day = (remaining: number, resetMs: number) => ({ window: "day", limit: 2, remaining, resetMs });
    expect(await take()).toEqual({ allowed: true, shown: day(1, 86_400_000) });
    expect(await take()).toEqual({ allowed: true, shown: day(0, 86_400_000) });
    // Refused by the day, then by the minute as well: the day either way, not "retry in 60 s".
    expect(await take()).toEqual({ allowed: false, shown: day(0, 86_400_000) });
    expect(await take()).toEqual({ allowed: false, shown: day(0, 86_400_000) });
    expect(await take()).toEqual({ allowed: false, shown: day(0, 86_400_000) });
    advance(60_000);
    expect(await take()).toEqual({ allowed: false, shown: day(0, 86_340_000) });
  });

  it("shows the minute when the day ends first, and of two windows with as many calls left the later", async () => {
    const limiter = new MemoryRateLimiter({ GET: { perMinute: 1, perDay: 2 }, POST: { perMinute: 2, perDay: 2 } });
    expect(await limiter.take("GET", "k")).toEqual({ allowed: true, shown: { window: "minute", limit: 1, remaining: 0, resetMs: 60_000 } });
    // Ten seconds before the day ends: its last call, then a refusal by the minute, which ends 50 s after the day.
    advance(86_390_000);
    expect(await limiter.take("GET", "k")).toEqual({ allowed: true, shown: { window: "minute", limit: 1, remaining: 0, resetMs: 60_000 } });
    expect(await limiter.take("GET", "k")).toEqual({ allowed: false, shown: { window: "minute", limit: 1, remaining: 0, resetMs: 60_000 } });
    // One call left in each: the day's numbers hold longer.
    expect(await limiter.take("POST", "k")).toEqual({ allowed: true, shown: { window: "day", limit: 2, remaining: 1, resetMs: 86_400_000 } });
  });

  it("keeps the classes and the keys apart", async () => {
    const limiter = new MemoryRateLimiter(limits);
    expect((await limiter.take("POST", "k"))!.allowed).toBe(true);
    expect((await limiter.take("POST", "k"))!.allowed).toBe(false);
    expect((await limiter.take("POST", "other"))!.allowed).toBe(true);
    expect((await limiter.take("GET", "k"))!.allowed).toBe(true);
  });

  it("counts PATCH, DELETE and PUT with POST, HEAD with GET", () => {
    expect(["GET", "HEAD", "POST", "PATCH", "DELETE", "PUT"].map(rateClassOf)).toEqual(["GET", "GET", "POST", "POST", "POST", "POST"]);
  });
});

// What bounds the memory store's memory (docs/rate-limits.md): the library deletes a key's entry by a timer when its
// window ends, so entries follow the keys seen within one window. Pinned here so that an upgrade that changed it shows.
describe("RateLimiterMemory, as the memory store relies on it", () => {
  it("deletes a key's entry when its window ends", async () => {
    vi.useFakeTimers({ toFake: ["Date", "setTimeout", "clearTimeout"] });
    const limiter = new RateLimiterMemory({ points: 5, duration: 60 });
    await limiter.consume("k");
    vi.advanceTimersByTime(59_999);
    expect(await limiter.get("k")).not.toBeNull();
    vi.advanceTimersByTime(1);
    expect(await limiter.get("k")).toBeNull();
  });
});
