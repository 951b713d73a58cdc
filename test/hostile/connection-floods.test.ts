import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminAuth } from "../support/credentials.js";
import { HEALTH_BOUND_MS, expectRssUnder, expectServing, slowestHealthDuring, startTarget } from "./harness.js";
import type { Target } from "./harness.js";
import { grpcHeaders, openStream, rapidReset, refusedThenReset, requestThenPingFlood, resetAfterBody, session, sleep, untilClosed } from "./raw-clients.js";
import type { StreamOutcome } from "./raw-clients.js";

// Many connections or streams at once: oversized messages held open, rapid resets, idle connections by the
// thousand, more connections than the server accepts. The server bounds each and keeps serving.

const IDLE_TIMEOUT_MS = 2_000;
const SLACK_MS = 3_000;
// What the server may hold once the attacks are over. V8 collects lazily: after these attacks a forced
// collection brings the heap back to about 11 MB (docs/robustness.md), but RSS keeps what the heap grew to
// until memory is needed; the bound says it stays far from what the attacks cost before (650 MB, 1.7 GB).
const RSS_BOUND_KB = 400 * 1024;

let target: Target;
beforeAll(async () => {
  target = await startTarget({ IDLE_TIMEOUT_SECONDS: String(IDLE_TIMEOUT_MS / 1000) });
});
afterAll(async () => {
  await target.stop();
});

// The start of a gRPC message whose envelope declares one byte over the 4 MiB limit: 256 KiB of it is sent, and
// the stream is left open as if the rest were coming.
function oversizedStart(): Buffer {
  const framed = Buffer.alloc(5 + 256 * 1024);
  framed.writeUInt32BE(4 * 1024 * 1024 + 1, 1);
  return framed;
}

describe("1,000 streams held open after an oversized message are answered, reset and released", () => {
  const start = oversizedStart();
  for (const path of ["/kms.v1.KeyManagerService/CreateCryptoKey", "/kms.v1.KeyManagerService/Encrypt"]) {
    it(path, async () => {
      const sessions: http2.ClientHttp2Session[] = [];
      const outcomes: StreamOutcome[] = [];
      const slowest = await slowestHealthDuring(target.url, async () => {
        const started = performance.now();
        for (let i = 0; i < 1000; i++) {
          if (i % 10 === 0) sessions.push(session(target.url));
          outcomes.push(openStream(sessions[sessions.length - 1]!, grpcHeaders(target.url, path), start, started).outcome);
          // Opened a session (10 streams) at a time, each waiting for its answers: 1,000 streams of 256 KiB at
          // once would be a test of the client's memory. Bursts of 100 at once are in slow-clients.test.ts.
          if (i % 10 === 9) await untilClosed(outcomes.slice(-10), 10_000);
        }
        await untilClosed(outcomes, 10_000);
      });
      for (const s of sessions) s.destroy();
      expect(outcomes.filter((o) => o.closedAtMs === null), "streams the server left open").toHaveLength(0);
      expect(new Set(outcomes.map((o) => `${o.status} grpc-status ${o.grpcStatus} rst ${o.rstCode}`))).toEqual(new Set(["200 grpc-status 8 rst 0"]));
      expect(slowest).toBeLessThan(HEALTH_BOUND_MS);
      await expectServing(target);
      await expectRssUnder(target, RSS_BOUND_KB);
    });
  }

  it("whole oversized messages, 10 streams on each of 2 sessions held open, are answered and reset the same way", async () => {
    const whole = Buffer.alloc(5 + 4 * 1024 * 1024 + 1);
    whole.writeUInt32BE(4 * 1024 * 1024 + 1, 1);
    // The client queues 40 MB per session; Node's client refuses that with its default session memory bound.
    const sessions = [session(target.url, { maxSessionMemory: 100 }), session(target.url, { maxSessionMemory: 100 })];
    const started = performance.now();
    const path = (i: number): string => (i % 2 === 0 ? "/kms.v1.KeyManagerService/CreateCryptoKey" : "/kms.v1.KeyManagerService/Encrypt");
    const outcomes = Array.from({ length: 20 }, (_, i) => openStream(sessions[i % 2]!, grpcHeaders(target.url, path(i)), whole, started).outcome);
    await untilClosed(outcomes, 20_000);
    for (const s of sessions) s.destroy();
    expect(new Set(outcomes.map((o) => `${o.status} grpc-status ${o.grpcStatus} rst ${o.rstCode}`))).toEqual(new Set(["200 grpc-status 8 rst 0"]));
  });
});

describe("rapid reset", () => {
  for (const path of ["/kms.v1.KeyManagerService/Encrypt", "/kms.v1.KeyManagerService/GetCryptoKey", "/v1/encrypt"]) {
    it(`${path}: 20 connections, each with 500 streams opened and reset at once, are sent GOAWAY`, async () => {
      const goaways: (number | null)[] = [];
      const slowest = await slowestHealthDuring(target.url, async () => {
        for (let n = 0; n < 20; n++) goaways.push(await rapidReset(target.port, path, 500, 2_000, adminAuth(target.url).authorization));
      });
      expect(new Set(goaways)).toEqual(new Set([http2.constants.NGHTTP2_ENHANCE_YOUR_CALM]));
      expect(slowest).toBeLessThan(HEALTH_BOUND_MS);
      await expectServing(target);
      await expectRssUnder(target, RSS_BOUND_KB);
    });
  }
});

// Streams announced, sent part of a body, then cancelled: the server's GOAWAY destroyed the session inside Node's
// HTTP/2 callbacks, which then allocated without end (400 MB a second, std::bad_alloc at a 32 GiB allocation) and
// never sent the GOAWAY (a probe, 2026-11-28). The probe's attack: 500 such streams on one connection, as a client
// library sends them. Not held to HEALTH_BOUND_MS: each stream is announced and answered before it is cancelled, and
// such a connection holds the event loop 50-110 ms before its cut (a bare node:http2 server 37-49 ms), so /healthz
// waited 105-150 ms in some runs (docs/robustness.md, "Rapid reset").
// A peer may reset with RST_STREAM(NO_ERROR): such resets were never counted, and the session was cut only by
// nghttp2's own limit, after about 1,000 of them (a probe, 2026-11-28).
describe("rapid reset with code NO_ERROR", () => {
  it("/kms.v1.KeyManagerService/GetCryptoKey: 20 connections of 500 streams, each reset with NO_ERROR, are sent GOAWAY", async () => {
    const goaways: (number | null)[] = [];
    for (let n = 0; n < 20; n++) goaways.push(await rapidReset(target.port, "/kms.v1.KeyManagerService/GetCryptoKey", 500, 2_000, adminAuth(target.url).authorization, 0x0));
    expect(new Set(goaways)).toEqual(new Set([http2.constants.NGHTTP2_ENHANCE_YOUR_CALM]));
    await expectServing(target);
  });
});

// Node closes a session for flooding (too many PINGs or SETTINGS unread) before it announces the streams of the read
// that opened it, then emits the session's error on each of them: a stream nobody listened to ended the process,
// from one unauthenticated connection of about 260 KB (a probe, 2026-11-28).
describe("a flood in the read that opens a session", () => {
  for (const path of ["/healthz", "/v1/keys", "/kms.v1.KeyManagerService/GetCryptoKey"]) {
    it(`${path}: a request then 20,000 PINGs in the first write, never read, ends that session only`, async () => {
      for (let n = 0; n < 3; n++) await requestThenPingFlood(target.port, path, 20_000, 500);
      await expectServing(target);
    });
  }
});

// The direct gRPC adapter refused an invalid grpc-timeout before it listened for the stream's errors: a client that
// held the window at 0 (so the refusal's end never went out) and then reset the stream with INTERNAL_ERROR ended the
// process, unauthenticated, in about 200 bytes (a probe, 2026-11-28).
describe("a stream refused on its head, then reset by its peer", () => {
  it("ends that stream only", async () => {
    for (const code of [0x1, 0x2]) await refusedThenReset(target.port, adminAuth(target.url).authorization, 3_000, code);
    await expectServing(target);
  });
});

// The session was destroyed right after its GOAWAY, while the peer was still sending: about 1 session in 150 then
// closed with a TCP reset and no GOAWAY (CI, 2026-11-28), so each path is tried 40 times. Each client goes on
// until it is cut (2,000 streams at most): one of 500 streams once ended without a cut in a busy run, all of its
// streams closed, as if some were cancelled before they were sent.
describe("rapid reset after a partial body", () => {
  for (const path of ["/kms.v1.KeyManagerService/GetCryptoKey", "/v1/encrypt"]) {
    it(`${path}: 40 connections whose streams are cancelled 1 ms after their first bytes are each sent GOAWAY`, async () => {
      const goaways: (number | null)[] = [];
      for (let n = 0; n < 40; n++) goaways.push(await resetAfterBody(target.port, path, 2_000, 2_000, adminAuth(target.url).authorization));
      expect(goaways).toEqual(Array(40).fill(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM));
      await expectServing(target);
      await expectRssUnder(target, RSS_BOUND_KB);
    });
  }
});

describe("idle connections", () => {
  it("2,000 idle connections (1,000 HTTP/1.1 keep-alive, 1,000 HTTP/2 sessions) are closed after the idle timeout", async () => {
    const closedAt: (number | null)[] = [];
    // Opened 100 at a time; each makes one call and then says nothing more. An agent each: with one agent shared, a
    // batch's calls went out on the sockets the batch before had left free, so that 100 connections were made, not
    // 1,000 (and a socket reused ten times had eleven "close" listeners, which node warned of).
    const h1Agents: http.Agent[] = [];
    const h1Call = (i: number): Promise<void> =>
      new Promise((resolve, reject) => {
        closedAt[i] = null;
        const agent = new http.Agent({ keepAlive: true });
        h1Agents.push(agent);
        const req = http.get(`${target.url}/healthz`, { agent }, (res) => {
          res.resume();
          res.on("end", () => resolve());
        });
        req.once("socket", (socket: net.Socket) => socket.once("close", () => (closedAt[i] = performance.now())));
        req.on("error", reject);
      });
    const h2Call = (i: number): Promise<void> =>
      new Promise((resolve) => {
        closedAt[i] = null;
        const s = session(target.url);
        s.once("close", () => (closedAt[i] = performance.now()));
        const req = s.request({ ":path": "/healthz" });
        req.on("data", () => {});
        req.on("close", () => resolve());
        req.end();
      });
    for (let batch = 0; batch < 10; batch++) {
      await Promise.all(Array.from({ length: 100 }, (_, j) => h1Call(batch * 100 + j)));
      await Promise.all(Array.from({ length: 100 }, (_, j) => h2Call(1_000 + batch * 100 + j)));
    }
    const opened = performance.now();
    expect(closedAt.filter((c) => c === null).length, "connections open before the idle timeout").toBeGreaterThan(1_900);
    const slowest = await slowestHealthDuring(target.url, async () => {
      const waitUntil = opened + IDLE_TIMEOUT_MS + SLACK_MS;
      while (closedAt.some((c) => c === null) && performance.now() < waitUntil) await sleep(100);
    });
    for (const agent of h1Agents) agent.destroy();
    expect(closedAt.filter((c) => c === null), "connections still open").toHaveLength(0);
    expect(Math.max(...closedAt.map((c) => (c ?? Infinity) - opened))).toBeLessThan(IDLE_TIMEOUT_MS + SLACK_MS);
    expect(slowest).toBeLessThan(HEALTH_BOUND_MS);
    await expectServing(target);
  });
});

describe("connection limit", () => {
  it("past MAX_CONNECTIONS a new connection is closed on arrival, and served again once others leave", async () => {
    const limited = await startTarget({ MAX_CONNECTIONS: "20" });
    try {
      const held = Array.from({ length: 20 }, () => net.connect(limited.port, "127.0.0.1"));
      for (const s of held) s.on("error", () => {});
      await Promise.all(held.map((s) => new Promise((r) => s.once("connect", r))));
      await sleep(100);
      const outcome = (): Promise<string> =>
        new Promise((resolve) => {
          const req = http.get(`${limited.url}/healthz`, { agent: false, timeout: 5_000 }, (res) => {
            res.resume();
            resolve(`HTTP ${res.statusCode}`);
          });
          req.on("timeout", () => req.destroy());
          req.on("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? "error"));
        });
      expect(await outcome()).toBe("ECONNRESET");
      for (const s of held) s.destroy();
      await sleep(200);
      expect(await outcome()).toBe("HTTP 200");
    } finally {
      await limited.stop();
    }
  });
});
