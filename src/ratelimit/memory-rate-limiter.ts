import type { Clock } from "../shared/clock.js";
import type { Decision, RateClass, RateLimiter, RateLimits } from "./rate-limits.js";
import { DAY_MS, MINUTE_MS, decide } from "./rate-limits.js";
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
    const minuteState = { window: "minute" as const, limit: minute.limit, remaining: m.remaining, resetMs: m.resetMs };
    if (m.remaining < 0) return decide(minuteState, null);
    const d = day.hit(key, now);
    return decide(minuteState, { window: "day", limit: day.limit, remaining: d.remaining, resetMs: d.resetMs });
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
