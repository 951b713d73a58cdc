import { describe, expect, it } from "vitest";
import { ConfigError, helpText, loadConfig } from "../../src/config.js";

// The rate-limit settings (docs/rate-limits.md): defaults as documented, flags over environment, and refusals that
// name the setting.

function config(env: Record<string, string>, argv: string[] = []) {
  const loaded = loadConfig(argv, env);
  if (loaded === "help") throw new Error("unexpected help");
  return loaded;
}

describe("rate-limit settings", () => {
  it("default to the documented limits on the compute platform's services, in memory, failing open", () => {
    const c = config({});
    expect(c.rateLimits).toEqual({ GET: { perMinute: 100, perDay: 10000 }, POST: { perMinute: 30, perDay: 1000 } });
    expect(c.rateLimitServices).toEqual(["compute.*"]);
    expect([c.redisUrl, c.rateLimitKeyPrefix, c.rateLimitStoreFailure]).toEqual(["", "cloudplane:ratelimit", "open"]);
  });

  it("take flags over the environment, and list services", () => {
    const c = config({ RATE_LIMIT_POST_PER_MINUTE: "5", RATE_LIMIT_SERVICES: "compute.*, kms.v1.KeyManagerService" }, ["--rate-limit-post-per-minute", "7", "--redis-url", "redis://127.0.0.1:6379/2"]);
    expect(c.rateLimits.POST.perMinute).toBe(7);
    expect(c.rateLimitServices).toEqual(["compute.*", "kms.v1.KeyManagerService"]);
    expect(c.redisUrl).toBe("redis://127.0.0.1:6379/2");
    expect(config({ RATE_LIMIT_SERVICES: "" }).rateLimitServices).toEqual([]);
  });

  it.each([
    [{ RATE_LIMIT_GET_PER_MINUTE: "0" }, `--rate-limit-get-per-minute (RATE_LIMIT_GET_PER_MINUTE) must be an integer from 1 to 9007199254740991, got "0"`],
    [{ RATE_LIMIT_SERVICES: "compute/*" }, `--rate-limit-services (RATE_LIMIT_SERVICES) lists services such as compute.*,kms.v1.KeyManagerService, got "compute/*"`],
    [{ REDIS_URL: "127.0.0.1:6379" }, "--redis-url (REDIS_URL) must be a redis:// or rediss:// URL"],
    [{ RATE_LIMIT_STORE_FAILURE: "maybe" }, `--rate-limit-store-failure (RATE_LIMIT_STORE_FAILURE) must be one of open, closed, got "maybe"`],
  ])("refuse %j, naming the setting", (env, message) => {
    expect(() => config(env)).toThrow(ConfigError);
    expect(() => config(env)).toThrow(message);
  });

  it("are listed by --help", () => {
    for (const env of ["RATE_LIMIT_GET_PER_MINUTE", "RATE_LIMIT_GET_PER_DAY", "RATE_LIMIT_POST_PER_MINUTE", "RATE_LIMIT_POST_PER_DAY", "RATE_LIMIT_SERVICES", "REDIS_URL", "RATE_LIMIT_KEY_PREFIX", "RATE_LIMIT_STORE_FAILURE"]) {
      expect(helpText()).toContain(env);
    }
  });
});
