import { Redis } from "ioredis";
import type { Logger } from "pino";
import { RateLimiterMemory, RateLimiterRedis } from "rate-limiter-flexible";
import type { FailureCounts } from "./failure-counts.js";
import { classWindows, takeFromWindows } from "./library-windows.js";
import type { ClassWindows } from "./library-windows.js";
import type { Decision, RateClass, RateLimiter, RateLimits } from "./rate-limits.js";

// How long start-up waits for Redis before serving anyway (the calls then fail open or closed as configured).
const CONNECT_WAIT_MS = 5000;
// A call waits at most this long for Redis; then the store counts as unreachable for it.
const COMMAND_TIMEOUT_MS = 1000;
// A connection that ioredis still holds ready but on which no call has succeeded for this long is replaced: one gone
// silent behind a dropped route (no error, no close) was kept for good, and every call waited its second, or was
// refused with RATE_LIMIT_STORE_FAILURE=closed, long after Redis was back (a probe of outages, 2026-11-28).
const REPLACE_SILENT_AFTER_MS = 5000;

// The shared store, selected by REDIS_URL: every server on the same Redis (and key prefix) draws from one budget per
// credential. rate-limiter-flexible's RateLimiterRedis counts each window atomically in Redis (one round trip per
// window), with the window opened by the first call and expiring by Redis's own clock, so servers agree on it. The
// windows are counted and decided as with the memory store (library-windows.ts); this class adds the connection.
export class RedisRateLimiter implements RateLimiter {
  private readonly client: Redis;
  private readonly windows: Record<RateClass, ClassWindows>;
  // Whether the last attempt to reach Redis failed: the outage is logged when it starts and when it ends, not once
  // per call.
  private down = false;
  private lastSuccess = performance.now();

  constructor(
    url: string,
    limits: RateLimits,
    private readonly keyPrefix: string,
    private readonly logger: Logger,
  ) {
    // No offline queue: while Redis is unreachable a call is answered at once (open or closed) instead of waiting
    // for a reconnection; ioredis keeps reconnecting in the background.
    this.client = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: COMMAND_TIMEOUT_MS, lazyConnect: false });
    this.client.on("error", (err: Error) => this.failed(err));
    this.client.on("ready", () => this.recovered());
    this.windows = classWindows(
      limits,
      (windowPrefix, points, windowMs) => new RateLimiterRedis({ storeClient: this.client, keyPrefix: `${keyPrefix}:${windowPrefix}`, points, duration: windowMs / 1000, rejectIfRedisNotReady: true }),
    );
  }

  // Failed authentications are counted in Redis too, under `<prefix>:<name>:<key>`, so that a client id blocked by
  // one server is blocked by all and N servers do not allow N times the limit (a probe with three servers,
  // 2026-11-28). While Redis is unreachable each server counts in its own memory (the library's insurance limiter):
  // for guessers that is the safe side, where RATE_LIMIT_STORE_FAILURE=open would have let every failure through.
  readonly failureCounts: FailureCounts = (name, window) =>
    new RateLimiterRedis({
      storeClient: this.client,
      keyPrefix: `${this.keyPrefix}:${name}`,
      ...window,
      rejectIfRedisNotReady: true,
      insuranceLimiter: new RateLimiterMemory({ keyPrefix: name, ...window }),
    });

  async take(rateClass: RateClass, key: string): Promise<Decision | null> {
    try {
      const decision = await takeFromWindows(this.windows[rateClass], key);
      this.lastSuccess = performance.now();
      this.recovered();
      return decision;
    } catch (err) {
      this.failed(err);
      if (this.client.status === "ready" && performance.now() - this.lastSuccess > REPLACE_SILENT_AFTER_MS) {
        this.lastSuccess = performance.now();
        this.logger.warn({ silentForMs: REPLACE_SILENT_AFTER_MS }, "rate limits: no call has reached Redis on its open connection for a while; connecting again");
        this.client.disconnect(true);
      }
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
