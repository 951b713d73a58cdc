import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminAuth } from "../support/credentials.js";
import { restCall } from "../support/kms-clients.js";
import { expectServing, healthMs, rssKb, startTarget } from "./harness.js";
import type { Target } from "./harness.js";
import { session, sleep } from "./raw-clients.js";

// Clients that ask for large answers and read none of them (docs/robustness.md, "Answers nobody reads"). On
// 82d22ee 128 HTTP/2 streams of a 3.4 MB list with a zero window took the server from 130 to 1,056 MB for about
// 150 s, and 60 such lists pipelined on one HTTP/1.1 socket to 681 MB. Each such connection is now closed once it
// holds more than MAX_UNSENT_OUTPUT_BYTES unsent, or holds unsent answers and reads nothing for the idle timeout;
// a pipelined HTTP/1.1 request is served only in its turn. A client that reads slowly but steadily gets all of a
// large answer.

const IDLE_TIMEOUT_MS = 3_000;
// The shape of the defaults (16 MiB against a largest list of about 10 MB), scaled down: a list of 300 keys of
// 64 labels of 128 characters is about 2.8 MB.
const MAX_UNSENT_BYTES = 4 * 1024 * 1024;
const KEYS = 300;
// The periodic check (250 ms) and scheduling on two shared cores.
const SLACK_MS = 3_000;
// Building the 128 lists of an HTTP/2 round before any answer is unsent: 3-5.6 s of CPU and collection on the
// machine this was written on (HEALTH_DURING_BOUND_MS), more on a slower one, where the session was closed after
// the test had stopped waiting in 2 of 5 runs (2026-11-28). What is asserted is that it is closed, not how soon:
// before the fix such sessions stayed for minutes.
const BUILD_MS = 8_000;
// What the server's RSS may grow by during an HTTP/1.1 attack. Before the fix 60 pipelined lists grew it by 390 MB
// (and each round of 128 HTTP/2 streams kept its 360 MB of answers for minutes, until its session closed).
const RSS_GROWTH_BOUND_KB = 120 * 1024;
// /healthz during an attack: 128 HTTP/2 streams make the server build 128 lists of 2.8 MB at once, 3-5.6 s of
// CPU and collection on this two-core machine before the fix and after it alike: the cost of the calls themselves, bounded by
// HTTP2_MAX_STREAMS, not by this fix (it bounds what they hold once built). It must answer all the same.
const HEALTH_DURING_BOUND_MS = 10_000;

const LIST_PATH = `/v1/keys?parentId=big&page.limit=${KEYS}`;

let target: Target;
let listBytes = 0;
beforeAll(async () => {
  target = await startTarget({ IDLE_TIMEOUT_SECONDS: String(IDLE_TIMEOUT_MS / 1000), MAX_UNSENT_OUTPUT_BYTES: String(MAX_UNSENT_BYTES) });
  const labels = Array.from({ length: 64 }, (_, i) => `${String(i).padStart(2, "0")}${"l".repeat(126)}`);
  const create = (): Promise<unknown> => restCall(target.url, "POST", "/v1/keys", { parentId: "big", description: "d".repeat(1024), labels });
  for (let i = 0; i < KEYS; i += 20) await Promise.all(Array.from({ length: 20 }, create));
  const res = await fetch(`${target.url}${LIST_PATH}`, { headers: adminAuth(target.url) });
  listBytes = (await res.arrayBuffer()).byteLength;
}, 120_000);
afterAll(async () => {
  await target.stop();
});

// Runs `attack` while sampling the server's RSS and /healthz (every 25 ms, each on a connection of its own);
// returns the peak RSS growth and the slowest /healthz.
async function measured(attack: () => Promise<void>): Promise<{ growthKb: number; peakKb: number; slowestHealthMs: number }> {
  const before = rssKb(target.pid);
  let peak = before;
  let slowest = 0;
  let done = false;
  const sampler = (async () => {
    while (!done) {
      peak = Math.max(peak, rssKb(target.pid));
      await sleep(25);
    }
  })();
  const prober = (async () => {
    while (!done) {
      slowest = Math.max(slowest, await healthMs(target.url, 10_000));
      await sleep(25);
    }
  })();
  try {
    await attack();
  } finally {
    done = true;
    await Promise.all([sampler, prober]);
  }
  if (process.env.HOSTILE_FIGURES !== undefined) console.log(`[figures] RSS ${before >> 10} -> peak ${peak >> 10} MiB, slowest /healthz ${slowest.toFixed(0)} ms`);
  return { growthKb: peak - before, peakKb: peak, slowestHealthMs: slowest };
}

function closedWithin(emitter: { once(event: "close", f: () => void): unknown }, ms: number): Promise<number | null> {
  const started = performance.now();
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(null), ms);
    emitter.once("close", () => {
      clearTimeout(timer);
      resolve(performance.now() - started);
    });
  });
}

describe("answers nobody reads", () => {
  it("the list is larger than an HTTP/2 window and smaller than the bound", () => {
    expect(listBytes).toBeGreaterThan(2 * 1024 * 1024);
    expect(listBytes).toBeLessThan(MAX_UNSENT_BYTES);
  });

  for (const [name, settings] of [
    ["a zero stream window", { initialWindowSize: 0 }],
    ["the default window, streams paused", {}],
  ] as const) {
    it(`HTTP/2, ${name}: 128 streams of a large list are cut off with their session, twice`, { timeout: 60_000 }, async () => {
      const attack = async (): Promise<number | null> => {
        const s = session(target.url, { settings });
        const closed = closedWithin(s, BUILD_MS + IDLE_TIMEOUT_MS + SLACK_MS);
        for (let i = 0; i < 128; i++) {
          const r = s.request({ ":path": LIST_PATH, ...adminAuth(target.url) });
          r.on("error", () => {});
          r.pause();
          r.end();
        }
        const after = await closed;
        s.destroy();
        return after;
      };
      // What a round holds is let go when its session is closed, which is what is asserted. Its RSS is not: a round's
      // peak is what building 128 lists at once costs (garbage V8 has not collected yet: 550-1,230 MB here, before
      // the fix and after it alike, one round to the next), so a comparison of two rounds' peaks failed or passed
      // by the collector's timing, not by what the server kept.
      const first = await measured(async () => void expect(await attack(), "ms until the server closed the session").not.toBeNull());
      const second = await measured(async () => void expect(await attack(), "ms until the server closed the session").not.toBeNull());
      expect(Math.max(first.slowestHealthMs, second.slowestHealthMs)).toBeLessThan(HEALTH_DURING_BOUND_MS);
      expect(target.logs()).toMatch(/closed the connection of 127\.0\.0\.1:\d+: it (held \d+ bytes of answers unsent|sent nothing)/);
      await expectServing(target);
    });
  }

  it("HTTP/1.1: 60 pipelined requests for a large list, nothing read, are served in turn and the socket is closed", async () => {
    let closedAfterMs: number | null = null;
    const { growthKb, slowestHealthMs } = await measured(async () => {
      const socket = net.connect(target.port, "127.0.0.1");
      socket.on("error", () => {});
      // A paused socket sees no close either: the server's log line, which names the client's port, tells it.
      socket.pause();
      await new Promise((r) => socket.once("connect", r));
      const request = `GET ${LIST_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: ${adminAuth(target.url).authorization}\r\n\r\n`;
      socket.write(request.repeat(60));
      const started = performance.now();
      const line = new RegExp(`closed the connection of 127\\.0\\.0\\.1:${socket.localPort}: it sent nothing`);
      while (!line.test(target.logs()) && performance.now() - started < IDLE_TIMEOUT_MS + SLACK_MS) await sleep(50);
      if (line.test(target.logs())) closedAfterMs = performance.now() - started;
      socket.destroy();
    });
    expect(closedAfterMs, "ms until the server closed the socket").not.toBeNull();
    expect(growthKb, "peak RSS growth of the server, KiB").toBeLessThan(RSS_GROWTH_BOUND_KB);
    expect(slowestHealthMs).toBeLessThan(HEALTH_DURING_BOUND_MS);
    await expectServing(target);
  });

  it("HTTP/1.1: pipelined requests are answered in order, each once the one before is out", async () => {
    const socket = net.connect(target.port, "127.0.0.1");
    let received = "";
    socket.on("data", (d: Buffer) => (received += d.toString("latin1")));
    const paths = ["/healthz", "/v1/keys?parentId=none", "/healthz", "/readyz"];
    socket.write(paths.map((p) => `GET ${p} HTTP/1.1\r\nHost: x\r\nAuthorization: ${adminAuth(target.url).authorization}\r\n\r\n`).join(""));
    const deadline = performance.now() + 5_000;
    while ((received.match(/HTTP\/1\.1 200/g) ?? []).length < paths.length && performance.now() < deadline) await sleep(20);
    socket.destroy();
    expect(received.match(/HTTP\/1\.1 \d+/g)).toEqual(["HTTP/1.1 200", "HTTP/1.1 200", "HTTP/1.1 200", "HTTP/1.1 200"]);
    expect(received.indexOf('"keys"') === -1 ? received.indexOf("{}") : received.indexOf('"keys"')).toBeGreaterThan(received.indexOf('"status":"ok"'));
  });
});

describe("a client that reads slowly but steadily gets the whole answer", () => {
  // About 640 KB/s: 64 KiB, then a pause of 100 ms; the list takes longer than the idle timeout to arrive.
  const PAUSE_MS = 100;

  it("HTTP/2", async () => {
    const s = session(target.url);
    const r = s.request({ ":path": LIST_PATH, ...adminAuth(target.url) });
    let bytes = 0;
    const started = performance.now();
    await new Promise<void>((resolve, reject) => {
      r.on("data", (chunk: Buffer) => {
        bytes += chunk.length;
        r.pause();
        setTimeout(() => r.resume(), PAUSE_MS * (chunk.length / 65_536));
      });
      r.on("end", () => resolve());
      r.on("error", reject);
      r.end();
    });
    s.close();
    expect(bytes).toBe(listBytes);
    expect(performance.now() - started).toBeGreaterThan(IDLE_TIMEOUT_MS);
  });

  it("HTTP/1.1", async () => {
    const socket = net.connect(target.port, "127.0.0.1");
    let received = Buffer.alloc(0);
    const started = performance.now();
    socket.write(`GET ${LIST_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: ${adminAuth(target.url).authorization}\r\n\r\n`);
    await new Promise<void>((resolve, reject) => {
      socket.on("data", (chunk: Buffer) => {
        received = Buffer.concat([received, chunk]);
        const head = received.indexOf("\r\n\r\n");
        const length = Number(/content-length: (\d+)/i.exec(received.subarray(0, Math.max(head, 0)).toString("latin1"))?.[1] ?? NaN);
        if (head >= 0 && received.length - head - 4 >= length) resolve();
        socket.pause();
        setTimeout(() => socket.resume(), PAUSE_MS * (chunk.length / 65_536));
      });
      socket.on("error", reject);
      socket.on("close", () => reject(new Error(`closed after ${received.length} bytes`)));
    });
    socket.destroy();
    expect(received.subarray(received.indexOf("\r\n\r\n") + 4).length).toBe(listBytes);
    expect(performance.now() - started).toBeGreaterThan(IDLE_TIMEOUT_MS);
  });
});
