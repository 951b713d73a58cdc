import { RateLimiterMemory } from "rate-limiter-flexible";
import type { Decision, RateClass, RateLimiter, RateLimits } from "./rate-limits.js";
import { countedInMemory } from "./failure-counts.js";
import { classWindows, takeFromWindows } from "./library-windows.js";
import type { ClassWindows } from "./library-windows.js";

// The default store: the counts of this process alone, in rate-limiter-flexible's RateLimiterMemory, counted as
// the Redis store counts (library-windows.ts). Each key's entry is deleted by a timer when its window ends; nothing
// else bounds how many there are (docs/rate-limits.md). The library reads Date.now(), not the injected clock: tests
// move time with vitest's fake Date.
export class MemoryRateLimiter implements RateLimiter {
  private readonly windows: Record<RateClass, ClassWindows>;
  readonly failureCounts = countedInMemory;

  constructor(limits: RateLimits) {
    this.windows = classWindows(limits, (keyPrefix, points, windowMs) => new RateLimiterMemory({ keyPrefix, points, duration: windowMs / 1000 }));
  }

  take(rateClass: RateClass, key: string): Promise<Decision> {
    return takeFromWindows(this.windows[rateClass], key);
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
