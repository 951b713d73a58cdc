import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import { RedisRateLimiter } from "../../src/ratelimit/redis-rate-limiter.js";
import { startTcpProxy } from "../support/tcp-proxy.js";

// A probe of outages (2026-11-28): the connection to Redis went silent behind a dropped route (no error, no close)
// and ioredis kept it, so every rate-limited call waited its second, or was refused with
// RATE_LIMIT_STORE_FAILURE=closed, long after Redis was back. It is now replaced once no call has succeeded for 5 s.
const REDIS_URL = new URL(process.env.CLOUDPLANE_TEST_REDIS_URL ?? "redis://127.0.0.1:6379");
const prefix = `cloudplane-test-${randomBytes(4).toString("hex")}`;

afterAll(async () => {
  const redis = new Redis(REDIS_URL.toString(), { lazyConnect: true });
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

describe("the rate limits' connection to Redis", () => {
  it("is replaced when it goes silent, and counting works again", { timeout: 30_000 }, async () => {
    const proxy = await startTcpProxy(REDIS_URL.toString(), 6379);
    const limits = { GET: { perMinute: 1000, perDay: 100_000 }, POST: { perMinute: 1000, perDay: 100_000 } };
    const limiter = new RedisRateLimiter(proxy.url, limits, prefix, createLogger("silent"));
    try {
      await limiter.ready();
      expect((await limiter.take("GET", "k"))?.allowed).toBe(true);
      proxy.silence();
      expect(await limiter.take("GET", "k")).toBeNull();
      const started = performance.now();
      await expect.poll(async () => (await limiter.take("GET", "k"))?.allowed ?? null, { timeout: 15_000, interval: 500 }).toBe(true);
      expect(performance.now() - started).toBeLessThan(10_000);
    } finally {
      await limiter.close();
      await proxy.close();
    }
  });
});
