import { Redis } from "ioredis";
import type { Logger } from "pino";
import { RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import type { Decision, RateClass, RateLimiter, RateLimits, WindowState } from "./rate-limits.js";
import { DAY_MS, MINUTE_MS, decide } from "./rate-limits.js";

// How long start-up waits for Redis before serving anyway (the calls then fail open or closed as configured).
const CONNECT_WAIT_MS = 5000;
// A call waits at most this long for Redis; then the store counts as unreachable for it.
const COMMAND_TIMEOUT_MS = 1000;

// The shared store, selected by REDIS_URL: every server on the same Redis (and key prefix) draws from one budget per
// credential. rate-limiter-flexible's RateLimiterRedis counts each window atomically in Redis (one round trip per
// window), with the window opened by the first call and expiring by Redis's own clock, so servers agree on it.
export class RedisRateLimiter implements RateLimiter {
  private readonly client: Redis;
  private readonly windows: Record<RateClass, { minute: RateLimiterRedis; day: RateLimiterRedis }>;
  // Whether the last attempt to reach Redis failed: the outage is logged when it starts and when it ends, not once
  // per call.
  private down = false;

  constructor(
    url: string,
    limits: RateLimits,
    keyPrefix: string,
    private readonly logger: Logger,
  ) {
    // No offline queue: while Redis is unreachable a call is answered at once (open or closed) instead of waiting
    // for a reconnection; ioredis keeps reconnecting in the background.
    this.client = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: COMMAND_TIMEOUT_MS, lazyConnect: false });
    this.client.on("error", (err: Error) => this.failed(err));
    this.client.on("ready", () => this.recovered());
    const windowsOf = (c: RateClass) => ({
      minute: this.windowLimiter(`${keyPrefix}:${c}:minute`, limits[c].perMinute, MINUTE_MS),
      day: this.windowLimiter(`${keyPrefix}:${c}:day`, limits[c].perDay, DAY_MS),
    });
    this.windows = { GET: windowsOf("GET"), POST: windowsOf("POST") };
  }

  async take(rateClass: RateClass, key: string): Promise<Decision | null> {
    const { minute, day } = this.windows[rateClass];
    try {
      // Both windows at once: one round trip's wait rather than two. A call the minute refuses is then given back
      // to the day, as the memory store never charges it (an extra round trip, on refusals only).
      const [m, d] = await Promise.all([count(minute, key, "minute"), count(day, key, "day")]);
      if (m.remaining < 0) await day.reward(key);
      this.recovered();
      return decide(m, m.remaining < 0 ? null : d);
    } catch (err) {
      this.failed(err);
      return null;
    }
  }

  // Resolves when Redis is ready, or at its first error (refused: it is down, and waiting will not help the first
  // calls), or after CONNECT_WAIT_MS.
  ready(): Promise<void> {
    if (this.client.status === "ready") return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.client.off("ready", done);
        this.client.off("error", done);
        resolve();
      };
      const timer = setTimeout(done, CONNECT_WAIT_MS);
      this.client.once("ready", done);
      this.client.once("error", done);
    });
  }

  close(): Promise<void> {
    this.client.disconnect();
    return Promise.resolve();
  }

  private windowLimiter(keyPrefix: string, points: number, windowMs: number): RateLimiterRedis {
    return new RateLimiterRedis({ storeClient: this.client, keyPrefix, points, duration: windowMs / 1000, rejectIfRedisNotReady: true });
  }

  private failed(err: unknown): void {
    if (this.down) return;
    this.down = true;
    this.logger.error({ err }, "rate limits: Redis is unreachable; calls are let through or refused as RATE_LIMIT_STORE_FAILURE says until it is back");
  }

  private recovered(): void {
    if (!this.down) return;
    this.down = false;
    this.logger.info("rate limits: Redis is reachable again");
  }
}

// One call counted in one window; a call over the limit comes back as a negative remainder, as from the memory
// store.
async function count(limiter: RateLimiterRedis, key: string, window: WindowState["window"]): Promise<WindowState> {
  let res: RateLimiterRes;
  try {
    res = await limiter.consume(key);
  } catch (thrown) {
    // rate-limiter-flexible rejects with the RateLimiterRes of a call over the limit, and with an Error when the
    // store failed.
    if (!(thrown instanceof RateLimiterRes)) throw thrown;
    res = thrown;
  }
  return { window, limit: limiter.points, remaining: limiter.points - res.consumedPoints, resetMs: Math.max(0, res.msBeforeNext) };
}
