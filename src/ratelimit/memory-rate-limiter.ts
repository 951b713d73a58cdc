import type { Clock } from "../shared/clock.js";
import type { Decision, RateClass, RateLimiter, RateLimits } from "./rate-limits.js";
import { DAY_MS, MINUTE_MS } from "./rate-limits.js";
import { WindowCounter } from "./window-counter.js";

// The default store: the counts of this process alone, answered synchronously. Time comes from the injected
// clock, so tests move into a fresh minute (or day) without sleeping.
export class MemoryRateLimiter implements RateLimiter {
  private readonly windows: Record<RateClass, { minute: WindowCounter; day: WindowCounter }>;

  constructor(
    limits: RateLimits,
    private readonly clock: Clock,
  ) {
    const windowsOf = (c: RateClass) => ({ minute: new WindowCounter(limits[c].perMinute, MINUTE_MS), day: new WindowCounter(limits[c].perDay, DAY_MS) });
    this.windows = { GET: windowsOf("GET"), POST: windowsOf("POST") };
  }

  take(rateClass: RateClass, key: string): Decision {
    const { minute, day } = this.windows[rateClass];
    const now = this.clock.now();
    const m = minute.hit(key, now);
    if (m < 0) return { allowed: false, shown: { window: "minute", limit: minute.limit, remaining: 0, resetMs: minute.lastResetMs } };
    const d = day.hit(key, now);
    // Only the window to show is built: this runs on every call of a limited method.
    if (d < 0) return { allowed: false, shown: { window: "day", limit: day.limit, remaining: 0, resetMs: day.lastResetMs } };
    if (d < m) return { allowed: true, shown: { window: "day", limit: day.limit, remaining: d, resetMs: day.lastResetMs } };
    return { allowed: true, shown: { window: "minute", limit: minute.limit, remaining: m, resetMs: minute.lastResetMs } };
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
