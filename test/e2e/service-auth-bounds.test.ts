import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { restFailure, restRequest } from "../support/kms-clients.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// POST /public/v2/service_auth bounds its client id and secret before anything is looked up or counted: the
// failure limiter remembers each client id tried for a minute, and 2 MB ids sent from many addresses, each within
// its address's limit of failures, took a server to 4 GB (a probe, 2026-11-27). An id or secret over its bound is
// INVALID_ARGUMENT, which is no failed authentication: the address is not blocked by any number of them.

let server: TestServer;

beforeAll(async () => {
  server = await startServer({ env: { AUTH_FAILURES_PER_MINUTE: "3" } });
});
afterAll(() => server.stop());

const noAuth = { authorization: "" };

function login(body: Record<string, string>) {
  return restRequest(server.url, "POST", "/public/v2/service_auth", { body, headers: noAuth });
}

describe("service_auth", () => {
  it("refuses a client_id over 128 characters and a client_secret over 256, naming each, quoting neither", async () => {
    const res = await login({ client_id: "i".repeat(2_000_000), client_secret: "s".repeat(257) });
    expect(res.status).toBe(400);
    expect(restFailure(res)).toMatchObject({
      code: 3,
      reason: "REQUEST_INVALID",
      domain: "compute",
      message: "client_id: must be at most 128 characters, got 2000000; client_secret: must be at most 256 characters, got 257",
    });
  });

  it("takes ids and secrets at their bounds, and counts none of the refusals as failed authentications", async () => {
    for (let i = 0; i < 10; i++) expect((await login({ client_id: `${i}`.repeat(129), client_secret: "x" })).status).toBe(400);
    // At the bounds: a failed authentication (401), not a refusal of the request.
    expect((await login({ client_id: "i".repeat(128), client_secret: "s".repeat(256) })).status).toBe(401);
    // With a limit of 3 failures a minute, the address is not blocked: the admin's own login works.
    const admin = JSON.parse(readFileSync(join(server.dataDir, "admin-credentials.json"), "utf8")) as Record<string, string>;
    const ok = await login({ client_id: admin.client_id ?? "", client_secret: admin.client_secret ?? "" });
    expect(ok.status, ok.text).toBe(200);
  });
});

describe("a source blocked for failed authentications", () => {
  it("is told in the server's log at the default level, once, with its address", async () => {
    const limited = await startServer({ env: { AUTH_FAILURES_PER_MINUTE: "2", LOG_LEVEL: "info" } });
    try {
      for (let i = 0; i < 4; i++) {
        await restRequest(limited.url, "GET", "/v1/keys/any", { headers: { authorization: `Bearer cpat.aaaaaaaaaaaaaaaa.guess${i}` } });
      }
      const lines = limited
        .logs()
        .split("\n")
        .filter((line) => line.includes("failed authentications:"))
        .map((line) => JSON.parse(line) as { level: number; address?: string; msg: string });
      expect(lines).toHaveLength(1);
      expect(lines[0]?.level).toBe(40);
      expect(JSON.stringify(lines[0])).toContain("127.0.0.1");
      expect(JSON.stringify(lines[0])).not.toContain("guess");
    } finally {
      await limited.stop();
    }
  });
});
