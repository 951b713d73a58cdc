import { randomUUID } from "node:crypto";
import { cpSync } from "node:fs";
import { create, toBinary } from "@bufbuild/protobuf";
import type { DescMessage, DescMethod, JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { NodePoolService } from "../../gen/compute/cluster/v1/node_pool_pb.js";
import { ConfigService } from "../../gen/compute/configs/v2/configs_pb.js";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { adminCredentials } from "../support/credentials.js";
import { makePrincipal } from "../support/principals.js";
import type { Principal } from "../support/principals.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { frame } from "../support/raw-grpc.js";
import { tempDir } from "../support/temp-dir.js";
import { frames, fromBase64Segments, trailerFrame, wireCall } from "../support/wire-call.js";
import type { WireAnswer, WireProtocol } from "../support/wire-call.js";
import { CLUSTER, FLAVOR, ROOMY_CLUSTER, VDC, writeTestCatalog } from "./compute-helpers.js";

// Issue 10, "Must show": the documented request-rate limits (CONTRACT section 6) per credential, counted by the
// HTTP method of each RPC's google.api.http rule on every protocol, per minute and per day at once, refused with
// RESOURCE_EXHAUSTED / 429 and every detail and header; shared across servers through Redis.

const pools = NodePoolService.method;
const documented = { RATE_LIMIT_GET_PER_MINUTE: "100", RATE_LIMIT_GET_PER_DAY: "10000", RATE_LIMIT_POST_PER_MINUTE: "30", RATE_LIMIT_POST_PER_DAY: "1000" };
const REDIS_URL = process.env.CLOUDPLANE_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

const list = { serviceInstanceId: VDC, clusterId: CLUSTER };

// The memory store (rate-limiter-flexible's RateLimiterMemory) reads Date.now(), not an injected clock: the tests
// that move time fake Date alone, in this process where the server runs too, so that time stands still until they
// move it and reset seconds are exact. Timers stay real, so the library's timer that deletes a key when its window
// ends fires in real time (a minute after the key's first call), long after any one test has finished with its key.
function freezeDate(): void {
  vi.useFakeTimers({ toFake: ["Date"] });
}

function advance(ms: number): void {
  vi.setSystemTime(Date.now() + ms);
}

function rateHeaders(answer: WireAnswer): Record<string, string | undefined> {
  return {
    limit: answer.headers["x-ratelimit-limit"],
    remaining: answer.headers["x-ratelimit-remaining"],
    reset: answer.headers["x-ratelimit-reset"],
  };
}

// The refusal, exactly, with the window's numbers (Date stands still, so the window has all of its time left).
function refused(protocol: WireProtocol, method: "GET" | "POST", limits: { minute: number; day: number }, window: "minute" | "day", retrySeconds: number) {
  const counted = method === "GET" ? "GET" : "POST, PATCH and DELETE";
  const limit = window === "minute" ? limits.minute : limits.day;
  return {
    http: protocol === "rest" || protocol.startsWith("connect") ? 429 : 200,
    code: 8,
    message: `rate limit exceeded: at most ${limit} ${counted} calls a ${window} for this credential (${limits.minute} a minute, ${limits.day} a day); retry in ${retrySeconds} s`,
    details: [
      {
        "@type": "google.rpc.ErrorInfo",
        reason: "RATE_LIMIT_EXCEEDED",
        domain: "compute",
        metadata: { method, limitPerMinute: String(limits.minute), limitPerDay: String(limits.day) },
      },
      {
        "@type": "google.rpc.QuotaFailure",
        violations: [{ subject: `${method} calls per ${window}`, description: `at most ${limit} ${counted} calls a ${window} for each credential` }],
      },
      { "@type": "google.rpc.RetryInfo", retryDelay: `${retrySeconds}s` },
    ],
  };
}

// X-RateLimit-* on every answer but a native gRPC success (docs/rate-limits.md).
function shownOnSuccess(protocol: WireProtocol, limit: number, remaining: number, reset: number): Record<string, string | undefined> {
  if (protocol === "grpc") return { limit: undefined, remaining: undefined, reset: undefined };
  return { limit: String(limit), remaining: String(remaining), reset: String(reset) };
}

// A gRPC-web call's HTTP headers and its trailer frame, apart (wireCall merges them), in the binary or the text form.
async function grpcWebParts<I extends DescMessage>(
  url: string,
  method: DescMethod & { input: I },
  init: MessageInitShape<I>,
  headers: Record<string, string>,
  text = false,
): Promise<{ status: number; headers: Record<string, string>; trailer: Record<string, string> }> {
  const body = frame(toBinary(method.input, create(method.input, init)));
  const res = await fetch(`${url}/${method.parent.typeName}/${method.name}`, {
    method: "POST",
    headers: { "content-type": text ? "application/grpc-web-text" : "application/grpc-web+proto", "x-grpc-web": "1", ...headers },
    body: text ? body.toString("base64") : new Uint8Array(body),
  });
  const raw = Buffer.from(await res.arrayBuffer());
  const trailer = frames(text ? fromBase64Segments(raw.toString("latin1")) : raw).find(([flags]) => (flags & 0x80) !== 0);
  const { date: _date, ...rest } = Object.fromEntries(res.headers);
  return { status: res.status, headers: rest, trailer: trailer === undefined ? {} : trailerFrame(trailer[1]) };
}

function withoutHeaders(answer: WireAnswer): Omit<WireAnswer, "headers" | "response"> {
  const { headers: _h, response: _r, ...rest } = answer;
  return rest;
}

describe("with the documented limits", () => {
  let server: TestServer;
  let catalog: ReturnType<typeof tempDir>;
  let n = 0;
  // A principal of its own for each test: a fresh budget.
  const caller = (): Promise<Principal> => makePrincipal(server, `caller-${++n}`, [["editor", `service-instance:${VDC}`], ["editor", "workspace:ws-1"]]);

  beforeAll(async () => {
    freezeDate();
    catalog = tempDir();
    server = await startServer({ env: { ...documented, CATALOG_FILE: writeTestCatalog(catalog.path) } });
  });
  afterAll(async () => {
    await server.stop();
    catalog.remove();
    vi.useRealTimers();
  });

  it.each(["rest", "grpc"] as const)("passes 100 GETs in a minute over %s and refuses the 101st with every detail and header", async (protocol) => {
    const { auth } = await caller();
    for (let i = 1; i <= 100; i++) {
      const answer = await wireCall(server.url, protocol, pools.listNodePools, list, auth);
      expect({ i, code: answer.code, ...rateHeaders(answer) }).toEqual({ i, code: 0, ...shownOnSuccess(protocol, 100, 100 - i, 60) });
    }
    const answer = await wireCall(server.url, protocol, pools.listNodePools, list, auth);
    expect(withoutHeaders(answer)).toEqual(refused(protocol, "GET", { minute: 100, day: 10000 }, "minute", 60));
    expect(rateHeaders(answer)).toEqual({ limit: "100", remaining: "0", reset: "60" });
    if (protocol === "rest") expect(answer.headers["retry-after"]).toBe("60");
    // A minute later the window is fresh.
    advance(60_000);
    const later = await wireCall(server.url, protocol, pools.listNodePools, list, auth);
    expect({ code: later.code, ...rateHeaders(later) }).toEqual({ code: 0, ...shownOnSuccess(protocol, 100, 99, 60) });
  });

  it.each(["rest", "grpc"] as const)("passes 30 POSTs in a minute over %s and refuses the 31st", async (protocol) => {
    const { auth } = await caller();
    const create = (i: number) => ({
      serviceInstanceId: VDC,
      clusterId: ROOMY_CLUSTER,
      nodePoolName: `${protocol}-pool-${i}`,
      nodeConfig: { computeFlavor: FLAVOR },
      scalePolicy: { fixedScale: { count: 1 } },
    });
    for (let i = 1; i <= 30; i++) {
      const answer = await wireCall(server.url, protocol, pools.createNodePool, create(i), auth);
      expect({ i, code: answer.code, ...rateHeaders(answer) }).toEqual({ i, code: 0, ...shownOnSuccess(protocol, 30, 30 - i, 60) });
    }
    const answer = await wireCall(server.url, protocol, pools.createNodePool, create(31), auth);
    expect(withoutHeaders(answer)).toEqual(refused(protocol, "POST", { minute: 30, day: 1000 }, "minute", 60));
    expect(rateHeaders(answer)).toEqual({ limit: "30", remaining: "0", reset: "60" });
    if (protocol === "rest") expect(answer.headers["retry-after"]).toBe("60");
    // Nothing was made for the refused call.
    const listed = await wireCall(server.url, "grpc", pools.listNodePools, { serviceInstanceId: VDC, clusterId: ROOMY_CLUSTER }, { authorization: `Bearer ${server.token}` });
    const names = ((listed.response as { nodePools?: { name: string }[] }).nodePools ?? []).map((p) => p.name);
    expect(names.filter((name) => name.startsWith(`${protocol}-pool-`))).toHaveLength(30);
    expect(names).not.toContain(`${protocol}-pool-31`);
  });

  it("counts PATCH and DELETE with POST", async () => {
    const { auth } = await caller();
    const pool = { serviceInstanceId: VDC, nodePoolId: "no-such-pool" };
    for (let i = 1; i <= 30; i++) {
      // Refused by the handler (the pool does not exist), yet counted: the limit is on calls, not on successes.
      const answer = i % 2 === 0 ? await wireCall(server.url, "rest", pools.updateNodePool, { ...pool, nodePoolName: "renamed" }, auth) : await wireCall(server.url, "rest", pools.deleteNodePool, pool, auth);
      expect({ i, code: answer.code, ...rateHeaders(answer) }).toEqual({ i, code: 5, limit: "30", remaining: String(30 - i), reset: "60" });
    }
    for (const answer of [
      await wireCall(server.url, "rest", pools.createNodePool, { serviceInstanceId: VDC, clusterId: ROOMY_CLUSTER }, auth),
      await wireCall(server.url, "rest", pools.updateNodePool, pool, auth),
      await wireCall(server.url, "grpc", pools.deleteNodePool, pool, auth),
    ]) {
      expect(answer.code).toBe(8);
      expect(answer.details[0]).toMatchObject({ metadata: { method: "POST" } });
    }
    // GETs have their own budget.
    const get = await wireCall(server.url, "rest", pools.listNodePools, list, auth);
    expect({ code: get.code, ...rateHeaders(get) }).toEqual({ code: 0, limit: "100", remaining: "99", reset: "60" });
  });

  it("gives two credentials separate budgets, an API key of a workspace its own", async () => {
    const a = await caller();
    const b = await caller();
    for (let i = 0; i < 100; i++) expect((await wireCall(server.url, "rest", pools.listNodePools, list, a.auth)).code).toBe(0);
    expect((await wireCall(server.url, "rest", pools.listNodePools, list, a.auth)).code).toBe(8);
    const other = await wireCall(server.url, "rest", pools.listNodePools, list, b.auth);
    expect({ code: other.code, ...rateHeaders(other) }).toEqual({ code: 0, limit: "100", remaining: "99", reset: "60" });
    // A's API key within its workspace is a credential of its own.
    const apiKey = (await server.app.identity.createApiKey(a.name, "ws-1")).text;
    const configs = await wireCall(server.url, "grpc-web", ConfigService.method.listConfigs, { clusterType: "MT" }, { ...a.auth, "x-api-key": apiKey, "x-workspace-id": "ws-1" });
    expect({ code: configs.code, ...rateHeaders(configs) }).toEqual({ code: 0, limit: "100", remaining: "99", reset: "60" });
  });

  it("draws a gRPC ListNodePools and a REST GET from the same GET budget", async () => {
    const { auth } = await caller();
    for (let i = 1; i <= 100; i++) {
      const protocol = i % 2 === 0 ? "rest" : "grpc";
      const answer = await wireCall(server.url, protocol, pools.listNodePools, list, auth);
      expect({ i, code: answer.code, ...rateHeaders(answer) }).toEqual({ i, code: 0, ...shownOnSuccess(protocol, 100, 100 - i, 60) });
    }
    for (const protocol of ["rest", "grpc", "grpc-web", "connect-json", "connect-binary"] as const) {
      expect(withoutHeaders(await wireCall(server.url, protocol, pools.listNodePools, list, auth))).toEqual(refused(protocol, "GET", { minute: 100, day: 10000 }, "minute", 60));
    }
  });

  // Retry-After on every protocol carried over plain HTTP (CONTRACT sections 4 and 6), as HTTP headers: Connect's
  // 429, and gRPC-web's refusal, whose HTTP headers carry X-RateLimit-* as its successes' do. Native gRPC as before:
  // X-RateLimit-* as metadata, the delay in RetryInfo, no Retry-After.
  it("sends Retry-After and X-RateLimit-* as HTTP headers with a refusal over Connect and gRPC-web", async () => {
    const { auth } = await caller();
    // Refused by the handler (no name), yet counted.
    const unnamed = { serviceInstanceId: VDC, clusterId: ROOMY_CLUSTER };
    for (let i = 1; i <= 30; i++) expect((await wireCall(server.url, "rest", pools.createNodePool, unnamed, auth)).code).toBe(3);
    const limited = { "retry-after": "60", "x-ratelimit-limit": "30", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "60" };
    for (const protocol of ["connect-json", "connect-binary", "rest"] as const) {
      const answer = await wireCall(server.url, protocol, pools.createNodePool, unnamed, auth);
      expect({ protocol, ...withoutHeaders(answer) }).toEqual({ protocol, ...refused(protocol, "POST", { minute: 30, day: 1000 }, "minute", 60) });
      expect({ protocol, ...answer.headers }).toMatchObject({ protocol, ...limited });
    }
    for (const text of [false, true]) {
      const answer = await grpcWebParts(server.url, pools.createNodePool, unnamed, auth, text);
      expect({ text, status: answer.status, ...answer.headers }).toMatchObject({ text, status: 200, ...limited });
      expect(answer.headers["grpc-status"]).toBeUndefined();
      // Each entry once, in the HTTP headers: repeated in the trailer frame, connect-web merged the two into the
      // error's metadata and read "30, 30" for the limit.
      expect(answer.trailer).toMatchObject({ "grpc-status": "8" });
      expect(Object.keys(answer.trailer).filter((name) => !name.startsWith("grpc-"))).toEqual([]);
      const decoded = await wireCall(server.url, text ? "grpc-web-text" : "grpc-web", pools.createNodePool, unnamed, auth);
      expect(withoutHeaders(decoded)).toEqual(refused("grpc-web", "POST", { minute: 30, day: 1000 }, "minute", 60));
    }
    const grpc = await wireCall(server.url, "grpc", pools.createNodePool, unnamed, auth);
    expect(withoutHeaders(grpc)).toEqual(refused("grpc", "POST", { minute: 30, day: 1000 }, "minute", 60));
    expect(rateHeaders(grpc)).toEqual({ limit: "30", remaining: "0", reset: "60" });
    expect(grpc.headers["retry-after"]).toBeUndefined();
  });

  it("does not limit the key management service by default", async () => {
    const answer = await wireCall(server.url, "grpc", KeyManagerService.method.listCryptoKeys, { parentId: "ns" }, { authorization: `Bearer ${server.token}` });
    expect(answer.code).toBe(0);
    expect(answer.headers["x-ratelimit-limit"]).toBeUndefined();
  });
});

describe("the per-day limit", () => {
  it("refuses when the day's budget is spent even in a fresh minute", async () => {
    freezeDate();
    const catalog = tempDir();
    const server = await startServer({ env: { ...documented, RATE_LIMIT_GET_PER_DAY: "150", CATALOG_FILE: writeTestCatalog(catalog.path) } });
    try {
      const auth = { authorization: `Bearer ${server.token}` };
      for (let i = 0; i < 100; i++) expect((await wireCall(server.url, "grpc", pools.listNodePools, list, auth)).code).toBe(0);
      advance(61_000);
      for (let i = 1; i <= 50; i++) {
        const answer = await wireCall(server.url, "rest", pools.listNodePools, list, auth);
        // The day has fewer calls left than the fresh minute: its window is the one shown.
        const dayLeft = 50 - i;
        expect({ i, code: answer.code, ...rateHeaders(answer) }).toEqual({ i, code: 0, limit: "150", remaining: String(dayLeft), reset: String(24 * 3600 - 61) });
      }
      const answer = await wireCall(server.url, "rest", pools.listNodePools, list, auth);
      expect(withoutHeaders(answer)).toEqual(refused("rest", "GET", { minute: 100, day: 150 }, "day", 24 * 3600 - 61));
      expect(answer.headers["retry-after"]).toBe(String(24 * 3600 - 61));
      // The next day starts afresh.
      advance(24 * 3600_000);
      expect((await wireCall(server.url, "grpc", pools.listNodePools, list, auth)).code).toBe(0);
    } finally {
      await server.stop();
      catalog.remove();
      vi.useRealTimers();
    }
  });
});

describe("once the day's budget is spent", () => {
  // The minute refuses calls the day would refuse too: the caller must hear of the day, or a client honouring
  // Retry-After comes back every minute to be refused again for the rest of the day.
  it("shows the day in every refusal, the minute's included, until the day ends", async () => {
    freezeDate();
    const catalog = tempDir();
    const server = await startServer({ env: { ...documented, RATE_LIMIT_GET_PER_MINUTE: "3", RATE_LIMIT_GET_PER_DAY: "2", CATALOG_FILE: writeTestCatalog(catalog.path) } });
    try {
      const auth = { authorization: `Bearer ${server.token}` };
      const limits = { minute: 3, day: 2 };
      const day = 24 * 3600;
      for (let i = 1; i <= 2; i++) {
        const answer = await wireCall(server.url, "rest", pools.listNodePools, list, auth);
        expect({ i, code: answer.code, ...rateHeaders(answer) }).toEqual({ i, code: 0, limit: "2", remaining: String(2 - i), reset: String(day) });
      }
      // The 3rd call the day refuses; the 4th, 5th and 6th the minute too.
      for (const protocol of ["rest", "rest", "connect-json", "grpc-web", "grpc"] as const) {
        const answer = await wireCall(server.url, protocol, pools.listNodePools, list, auth);
        expect({ protocol, ...withoutHeaders(answer) }).toEqual({ protocol, ...refused(protocol, "GET", limits, "day", day) });
        expect({ protocol, ...rateHeaders(answer), retryAfter: answer.headers["retry-after"] }).toEqual({
          protocol,
          limit: "2",
          remaining: "0",
          reset: String(day),
          retryAfter: protocol === "grpc" ? undefined : String(day),
        });
      }
      // A minute later, still the day, with a minute less to wait.
      advance(60_000);
      const later = await wireCall(server.url, "rest", pools.listNodePools, list, auth);
      expect(withoutHeaders(later)).toEqual(refused("rest", "GET", limits, "day", day - 60));
      expect({ ...rateHeaders(later), retryAfter: later.headers["retry-after"] }).toEqual({ limit: "2", remaining: "0", reset: String(day - 60), retryAfter: String(day - 60) });
      // When the day ends, both windows start afresh.
      advance((day - 60) * 1000);
      const next = await wireCall(server.url, "rest", pools.listNodePools, list, auth);
      expect({ code: next.code, ...rateHeaders(next) }).toEqual({ code: 0, limit: "2", remaining: "1", reset: String(day) });
    } finally {
      await server.stop();
      catalog.remove();
      vi.useRealTimers();
    }
  });
});

describe("on the virtualization API's XML surface", () => {
  it("counts POST /api/sessions with the REST service_auth it shares ServiceAuth with, by address, and refuses in XML", async () => {
    const server = await startServer({ env: documented });
    try {
      const admin = adminCredentials(server.dataDir);
      const basic = `Basic ${Buffer.from(`${admin.client_id}@System:${admin.client_secret}`).toString("base64")}`;
      const post = () => fetch(`${server.url}/api/sessions`, { method: "POST", headers: { authorization: basic, accept: "application/*;version=38.0" } });
      // The test support logged in once over REST (POST /public/v2/service_auth) from the same address.
      for (let i = 2; i <= 30; i++) {
        const res = await post();
        expect({ i, status: res.status, remaining: res.headers.get("x-ratelimit-remaining") }).toEqual({ i, status: 200, remaining: String(30 - i) });
      }
      const res = await post();
      expect(res.status).toBe(429);
      expect(res.headers.get("retry-after")).toBe("60");
      expect([res.headers.get("x-ratelimit-limit"), res.headers.get("x-ratelimit-remaining")]).toEqual(["30", "0"]);
      expect(await res.text()).toContain('majorErrorCode="429" minorErrorCode=');
      const rest = await fetch(`${server.url}/public/v2/service_auth`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(admin) });
      expect(rest.status).toBe(429);
    } finally {
      await server.stop();
    }
  });
});

describe("with Redis", () => {
  const prefix = `cloudplane-test:${randomUUID()}`;
  const redis = new Redis(REDIS_URL, { lazyConnect: true });

  afterAll(async () => {
    // The keys of this run, so that runs neither collide nor leave keys behind.
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  // Two servers that know the same principals, each with a limiter, counting in the same Redis. A SQLite data
  // directory takes one server (docs/storage.md), so the second runs on a copy of the first's, made while it was
  // stopped; its admin is the same principal, whose budget the servers share whichever token it sends.
  async function twoServers(env: Record<string, string>): Promise<{ first: TestServer; second: TestServer; dataDir: string; remove(): void }> {
    const dirs = [tempDir(), tempDir()] as const;
    await (await startServer({ dataDir: dirs[0].path, env })).stop();
    cpSync(dirs[0].path, dirs[1].path, { recursive: true });
    const first = await startServer({ dataDir: dirs[0].path, env });
    const second = await startServer({ dataDir: dirs[1].path, env });
    return { first, second, dataDir: dirs[0].path, remove: () => dirs.forEach((d) => d.remove()) };
  }

  it("holds one budget across two servers sharing Redis", async () => {
    const catalog = tempDir();
    const env = { ...documented, REDIS_URL, RATE_LIMIT_KEY_PREFIX: prefix, CATALOG_FILE: writeTestCatalog(catalog.path) };
    const { first, second, remove } = await twoServers(env);
    try {
      for (let i = 1; i <= 100; i++) {
        const server = i % 2 === 0 ? second : first;
        const auth = { authorization: `Bearer ${server.token}` };
        const answer = await wireCall(server.url, i % 3 === 0 ? "rest" : "connect-binary", pools.listNodePools, list, auth);
        expect({ i, code: answer.code, remaining: answer.headers["x-ratelimit-remaining"] }).toEqual({ i, code: 0, remaining: String(100 - i) });
      }
      for (const server of [first, second]) {
        const answer = await wireCall(server.url, "rest", pools.listNodePools, list, { authorization: `Bearer ${server.token}` });
        expect(answer.code).toBe(8);
        // Redis's clock: the window opened by the first call, some seconds ago.
        expect(Number(answer.headers["retry-after"])).toBeGreaterThanOrEqual(1);
        expect(Number(answer.headers["retry-after"])).toBeLessThanOrEqual(60);
        expect(answer.details[0]).toMatchObject({ reason: "RATE_LIMIT_EXCEEDED", metadata: { method: "GET", limitPerMinute: "100" } });
      }
      expect((await redis.keys(`${prefix}*`)).length).toBeGreaterThan(0);
    } finally {
      await second.stop();
      await first.stop();
      remove();
      catalog.remove();
    }
  });

  // Failed authentications are counted in the same store: each of two servers allowed its own 20 a minute, and a
  // client id blocked by one still got a token from the other (a probe with three servers, 2026-11-28).
  it("counts failed authentications across two servers sharing Redis, and blocks a client id on both", async () => {
    const env = { AUTH_FAILURES_PER_MINUTE: "3", REDIS_URL, RATE_LIMIT_KEY_PREFIX: `${prefix}:auth` };
    const { first, second, dataDir, remove } = await twoServers(env);
    const admin = adminCredentials(dataDir);
    const serviceAuth = async (server: TestServer, secret: string) => {
      const res = await fetch(`${server.url}/public/v2/service_auth`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ client_id: admin.client_id, client_secret: secret }),
      });
      const body = (await res.json()) as { message?: string };
      // REST's details are {typeUrl, value} (CONTRACT section 3): the message tells a block from a wrong secret.
      return { status: res.status, blocked: body.message?.startsWith("too many failed authentications from this client id") ?? false };
    };
    try {
      const answers = [];
      for (const server of [first, second, first, second]) answers.push(await serviceAuth(server, "cpcs.wrong"));
      expect(answers).toEqual([
        { status: 401, blocked: false },
        { status: 401, blocked: false },
        { status: 401, blocked: false },
        { status: 429, blocked: true },
      ]);
      // Blocked on both, the right secret included.
      for (const server of [first, second]) expect(await serviceAuth(server, admin.client_secret)).toEqual({ status: 429, blocked: true });
      // One block, told once, by the server that counted the failure over the limit.
      const told = (server: TestServer) => server.logs().split("\n").filter((line) => line.includes("failed authentications: client id")).length;
      expect(told(first) + told(second)).toBe(1);
    } finally {
      await second.stop();
      await first.stop();
      remove();
    }
  });

  it("shows the spent day in the minute's refusals, as the memory store does", async () => {
    const catalog = tempDir();
    const server = await startServer({
      env: { ...documented, RATE_LIMIT_GET_PER_MINUTE: "3", RATE_LIMIT_GET_PER_DAY: "2", REDIS_URL, RATE_LIMIT_KEY_PREFIX: `${prefix}:day`, CATALOG_FILE: writeTestCatalog(catalog.path) },
    });
    try {
      const auth = { authorization: `Bearer ${server.token}` };
      for (let i = 1; i <= 2; i++) expect((await wireCall(server.url, "rest", pools.listNodePools, list, auth)).code).toBe(0);
      for (let i = 3; i <= 6; i++) {
        const answer = await wireCall(server.url, i % 2 === 0 ? "rest" : "connect-json", pools.listNodePools, list, auth);
        // Redis's clock: the day opened by the first call, a moment ago.
        const seconds = Number(answer.headers["retry-after"]);
        expect(seconds).toBeGreaterThan(24 * 3600 - 30);
        expect(seconds).toBeLessThanOrEqual(24 * 3600);
        const protocol = i % 2 === 0 ? "rest" : "connect-json";
        expect({ i, ...withoutHeaders(answer) }).toEqual({ i, ...refused(protocol, "GET", { minute: 3, day: 2 }, "day", seconds) });
        expect({ i, ...rateHeaders(answer) }).toEqual({ i, limit: "2", remaining: "0", reset: String(seconds) });
      }
    } finally {
      await server.stop();
      catalog.remove();
    }
  });

  // Whatever RATE_LIMIT_STORE_FAILURE says for the request limits: letting every guess through while Redis is down
  // would make an outage of the limiter's store an opening for guessers.
  it("counts failed authentications in memory while Redis is unreachable", async () => {
    const server = await startServer({ env: { AUTH_FAILURES_PER_MINUTE: "3", REDIS_URL: "redis://127.0.0.1:1", RATE_LIMIT_STORE_FAILURE: "open" } });
    try {
      const codes = [];
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`${server.url}/public/v2/service_auth`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ client_id: "cpci.nobody", client_secret: "cpcs.wrong" }),
        });
        codes.push(res.status);
      }
      expect(codes).toEqual([401, 401, 401, 429]);
    } finally {
      await server.stop();
    }
  });

  it.each(["open", "closed"] as const)("fails %s when Redis is unreachable, and logs it once", async (failure) => {
    const catalog = tempDir();
    const server = await startServer({
      // Node pools alone, so that the test support can still log in (ServiceAuth is a compute call too).
      env: {
        ...documented,
        REDIS_URL: "redis://127.0.0.1:1",
        RATE_LIMIT_STORE_FAILURE: failure,
        RATE_LIMIT_SERVICES: "compute.cluster.v1.NodePoolService",
        CATALOG_FILE: writeTestCatalog(catalog.path),
      },
    });
    try {
      const auth = { authorization: `Bearer ${server.token}` };
      for (let i = 0; i < 5; i++) {
        const answer = await wireCall(server.url, "rest", pools.listNodePools, list, auth);
        if (failure === "open") {
          expect({ code: answer.code, limit: answer.headers["x-ratelimit-limit"] }).toEqual({ code: 0, limit: undefined });
        } else {
          expect(withoutHeaders(answer)).toEqual({
            http: 503,
            code: 14,
            message: "the rate limits cannot be checked now (their store is unreachable); retry shortly",
            details: [
              { "@type": "google.rpc.ErrorInfo", reason: "RATE_LIMITER_UNAVAILABLE", domain: "compute" },
              { "@type": "google.rpc.RetryInfo", retryDelay: "5s" },
            ],
          });
          expect(answer.headers["retry-after"]).toBe("5");
        }
      }
      if (failure === "closed") {
        // Retry-After on every protocol carried over plain HTTP, from the refusal's RetryInfo.
        const connect = await wireCall(server.url, "connect-json", pools.listNodePools, list, auth);
        expect({ http: connect.http, code: connect.code, retryAfter: connect.headers["retry-after"] }).toEqual({ http: 503, code: 14, retryAfter: "5" });
        const grpcWeb = await grpcWebParts(server.url, pools.listNodePools, list, auth);
        expect({ retryAfter: grpcWeb.headers["retry-after"], status: grpcWeb.trailer["grpc-status"] }).toEqual({ retryAfter: "5", status: "14" });
        const grpc = await wireCall(server.url, "grpc", pools.listNodePools, list, auth);
        expect({ code: grpc.code, retryAfter: grpc.headers["retry-after"] }).toEqual({ code: 14, retryAfter: undefined });
      }
      const lines = server.logs().split("\n").filter((line) => line.includes("Redis is unreachable"));
      expect(lines).toHaveLength(1);
      expect((JSON.parse(lines[0]!) as JsonObject).level).toBe(50);
    } finally {
      await server.stop();
      catalog.remove();
    }
  });
});
