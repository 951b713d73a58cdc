import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig, servedServiceNames } from "../../src/config.js";
import { apiServices } from "../../src/routes.js";

// Settings that could never work are refused at start, naming the setting and what it takes (docs/access.md,
// "Browsers"; docs/rate-limits.md): a CORS origin a browser never sends, a rate-limited service the server does not
// serve.

function config(env: Record<string, string>) {
  const loaded = loadConfig([], env);
  if (loaded === "help") throw new Error("unexpected help");
  return loaded;
}

function refusal(env: Record<string, string>): string {
  try {
    config(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  throw new Error("not refused");
}

const ORIGIN_RULE =
  '--cors-allowed-origins (CORS_ALLOWED_ORIGINS) lists origins as browsers send them, scheme://host[:port] with scheme http or https and nothing after the port (no path, not even "/"), or *; got';

describe("CORS_ALLOWED_ORIGINS", () => {
  it.each([
    ["notaurl", `${ORIGIN_RULE} "notaurl"`],
    ["https://a.com,console.example.com", `${ORIGIN_RULE} "console.example.com"`],
    ["ftp://a.com", `${ORIGIN_RULE} "ftp://a.com"`],
    ["null", `${ORIGIN_RULE} "null"`],
    ["https://a.com/path", `${ORIGIN_RULE} "https://a.com/path", which a browser would send as "https://a.com"`],
    ["https://a.com/", `${ORIGIN_RULE} "https://a.com/", which a browser would send as "https://a.com"`],
    ["https://Console.Example.com", `${ORIGIN_RULE} "https://Console.Example.com", which a browser would send as "https://console.example.com"`],
    ["https://a.com:443", `${ORIGIN_RULE} "https://a.com:443", which a browser would send as "https://a.com"`],
    ["https://user@a.com", `${ORIGIN_RULE} "https://user@a.com", which a browser would send as "https://a.com"`],
    ["https://a.com?x=1", `${ORIGIN_RULE} "https://a.com?x=1", which a browser would send as "https://a.com"`],
  ])("refuses %j", (value, message) => {
    expect(refusal({ CORS_ALLOWED_ORIGINS: value })).toBe(message);
  });

  it("takes origins as browsers send them, and *", () => {
    expect(config({ CORS_ALLOWED_ORIGINS: "https://console.example.com, http://localhost:5173,http://[::1]:8080" }).corsAllowedOrigins).toEqual([
      "https://console.example.com",
      "http://localhost:5173",
      "http://[::1]:8080",
    ]);
    expect(config({ CORS_ALLOWED_ORIGINS: "*" }).corsAllowedOrigins).toEqual(["*"]);
    expect(config({}).corsAllowedOrigins).toEqual([]);
  });
});

describe("RATE_LIMIT_SERVICES", () => {
  const served = "compute.auth.v2.AuthService, kms.v1.KeyManagerService, compute.configs.v2.ConfigService, compute.cluster.v1.NodePoolService, compute.cluster.v1.TaskService, compute.vapp.v1.VAppService";

  it.each(["compute.cluster.v1.NodePoolServce", "compute.*,kms.v2.KeyManagerService", "comput.*", "compute.cluster.v2.*", "grpc.health.v1.Health", "compute"])(
    "refuses %j, which names no served service",
    (value) => {
      const bad = value.split(",").at(-1);
      expect(refusal({ RATE_LIMIT_SERVICES: value })).toBe(
        `--rate-limit-services (RATE_LIMIT_SERVICES): "${bad}" names no served service; name one in full (${served}), a package prefix of them (compute.*, compute.cluster.*, kms.*) or * for all`,
      );
    },
  );

  it("takes full names, package prefixes of served services, and *", () => {
    const value = "compute.cluster.v1.NodePoolService,compute.*,compute.cluster.*,kms.*,kms.v1.*,*";
    expect(config({ RATE_LIMIT_SERVICES: value }).rateLimitServices).toEqual(value.split(","));
  });

  it("knows the services routes.ts serves", () => {
    expect([...servedServiceNames].sort()).toEqual(apiServices.map((s) => s.typeName).sort());
  });
});
