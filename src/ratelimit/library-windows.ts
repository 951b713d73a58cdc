import { RateLimiterRes } from "rate-limiter-flexible";
import type { RateLimiterAbstract } from "rate-limiter-flexible";
import type { Decision, RateClass, RateLimits, WindowState } from "./rate-limits.js";
import { DAY_MS, MINUTE_MS, decide } from "./rate-limits.js";

// The two windows of one class, each a rate-limiter-flexible limiter of either store (RateLimiterMemory,
// RateLimiterRedis): a fixed window per key, opened by the key's first call, as both stores count.
export interface ClassWindows {
  minute: RateLimiterAbstract;
  day: RateLimiterAbstract;
}

// The windows of both classes, made by the store's factory from the keys' prefix, the limit and the window's length.
export function classWindows(limits: RateLimits, make: (keyPrefix: string, points: number, windowMs: number) => RateLimiterAbstract): Record<RateClass, ClassWindows> {
  const of = (c: RateClass): ClassWindows => ({ minute: make(`${c}:minute`, limits[c].perMinute, MINUTE_MS), day: make(`${c}:day`, limits[c].perDay, DAY_MS) });
  return { GET: of("GET"), POST: of("POST") };
}

// Counts one call of `key` in both windows and decides. Both at once: with Redis one round trip's wait rather than
// two. A call the minute refuses is then given back to the day, so that a burst refused by the minute does not eat
// the day's budget (one more round trip, on refusals only); the day's count is still told to `decide`, which shows
// the day when it is spent too. Rejects when the store failed.
export async function takeFromWindows({ minute, day }: ClassWindows, key: string): Promise<Decision> {
  const [m, d] = await Promise.all([count(minute, key, "minute"), count(day, key, "day")]);
  if (m.remaining >= 0) return decide(m, d);
  await day.reward(key);
  return decide(m, { ...d, remaining: d.remaining + 1 });
}

// One call counted in one window; a call over the limit comes back as a negative remainder. The time to the window's
// end is at most its length: the memory store computes it from the wall clock (its expiry stored as a Date.now()
// time) while it ends windows by timers, so after the clock stepped back an hour a minute's window answered
// Retry-After: 3660 for a block that ended within the minute (a probe of the clock, 2026-11-28).
async function count(limiter: RateLimiterAbstract, key: string, window: WindowState["window"]): Promise<WindowState> {
  let res: RateLimiterRes;
  try {
    res = await limiter.consume(key);
  } catch (thrown) {
    // rate-limiter-flexible rejects with the RateLimiterRes of a call over the limit, and with an Error when the
    // store failed.
    if (!(thrown instanceof RateLimiterRes)) throw thrown;
    res = thrown;
  }
  const windowMs = window === "minute" ? MINUTE_MS : DAY_MS;
  return { window, limit: limiter.points, remaining: limiter.points - res.consumedPoints, resetMs: Math.min(windowMs, Math.max(0, res.msBeforeNext)) };
}
