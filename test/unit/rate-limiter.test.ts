import { describe, expect, it } from "vitest";
import { MemoryRateLimiter } from "../../src/ratelimit/memory-rate-limiter.js";
import { rateClassOf } from "../../src/ratelimit/rate-limits.js";
import { WindowCounter } from "../../src/ratelimit/window-counter.js";
import { FakeClock } from "../support/fake-clock.js";

describe("WindowCounter", () => {
  it("opens a window at a key's first call and starts afresh when it ends", () => {
    const counter = new WindowCounter(2, 1000);
    const hit = (key: string, now: number) => ({ remaining: counter.hit(key, now), resetMs: counter.lastResetMs });
    expect(hit("a", 0)).toEqual({ remaining: 1, resetMs: 1000 });
    expect(hit("a", 400)).toEqual({ remaining: 0, resetMs: 600 });
    expect(hit("a", 999)).toEqual({ remaining: -1, resetMs: 1 });
    expect(hit("b", 999)).toEqual({ remaining: 1, resetMs: 1000 });
    expect(hit("a", 1000)).toEqual({ remaining: 1, resetMs: 1000 });
  });

  it("drops the entries of closed windows as the map grows, so memory follows the callers of one window", () => {
    const counter = new WindowCounter(10, 1000);
    for (let i = 0; i < 1024; i++) counter.hit(`old-${i}`, 0);
    for (let i = 0; i < 1024; i++) counter.hit(`new-${i}`, 5000);
    expect(counter.size).toBe(1024);
  });

  it("holds at most its bound of keys, dropping the oldest", () => {
    const counter = new WindowCounter(10, 60_000, 3);
    for (const key of ["a", "b", "c", "d"]) counter.hit(key, 0);
    expect(counter.size).toBe(3);
    // "a" went first: it starts afresh; "d" keeps its count.
    expect(counter.hit("a", 1)).toBe(9);
    expect(counter.hit("d", 1)).toBe(8);
  });
});

describe("MemoryRateLimiter", () => {
  const limits = { GET: { perMinute: 3, perDay: 5 }, POST: { perMinute: 1, perDay: 10 } };

  it("refuses by the minute without spending the day, and by the day in a fresh minute", () => {
    const clock = new FakeClock(0);
    const limiter = new MemoryRateLimiter(limits, clock);
    const take = () => limiter.take("GET", "k");
    expect([take(), take(), take()].map((d) => [d.allowed, d.shown.window, d.shown.remaining])).toEqual([
      [true, "minute", 2],
      [true, "minute", 1],
      [true, "minute", 0],
    ]);
    expect(take()).toEqual({ allowed: false, shown: { window: "minute", limit: 3, remaining: 0, resetMs: 60_000 } });
    expect(take().allowed).toBe(false);
    clock.advance(60_000);
    // Two of the day's five are left (the refused calls did not count): the day is the window shown.
    expect(take()).toEqual({ allowed: true, shown: { window: "day", limit: 5, remaining: 1, resetMs: 86_400_000 - 60_000 } });
    expect(take().allowed).toBe(true);
    expect(take()).toEqual({ allowed: false, shown: { window: "day", limit: 5, remaining: 0, resetMs: 86_400_000 - 60_000 } });
  });

  it("keeps the classes and the keys apart", () => {
    const limiter = new MemoryRateLimiter(limits, new FakeClock(0));
    expect(limiter.take("POST", "k").allowed).toBe(true);
    expect(limiter.take("POST", "k").allowed).toBe(false);
    expect(limiter.take("POST", "other").allowed).toBe(true);
    expect(limiter.take("GET", "k").allowed).toBe(true);
  });

  it("counts PATCH, DELETE and PUT with POST, HEAD with GET", () => {
    expect(["GET", "HEAD", "POST", "PATCH", "DELETE", "PUT"].map(rateClassOf)).toEqual(["GET", "GET", "POST", "POST", "POST", "POST"]);
  });
});
