import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import { expect } from "vitest";
import { restCall } from "../support/kms-clients.js";
import { spawnServer } from "../support/server.js";
import type { SpawnedServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";

// What every hostile-client test needs: the real server in its own process (so that a crash, a stall or the
// memory it holds is its own and measurable), and the checks that it is still serving everyone else.

export interface Target extends SpawnedServer {
  dataDir: string;
  stop(): Promise<void>;
}

// On this two-core machine the attacking test, the server and the health probe share the CPU. An attacker
// elsewhere would not take the server's CPU, so the test process runs at a lower priority than the server and the
// probe (a higher nice value needs no privilege; giving a child back the normal priority needs root, as in CI,
// and is skipped without it).
const ATTACKER_NICE = 10;

function atNormalPriority(pid: number): void {
  try {
    os.setPriority(pid, 0);
  } catch {
    // Not root: the child keeps the priority it inherited.
  }
}

function attackerPriority(): void {
  if (os.getPriority() < ATTACKER_NICE) os.setPriority(ATTACKER_NICE);
}

export async function startTarget(env: Record<string, string> = {}): Promise<Target> {
  const dir = tempDir("cloudplane-hostile-");
  const server = await spawnServer({ dataDir: dir.path, env });
  atNormalPriority(server.pid);
  attackerPriority();
  return Object.assign(server, {
    dataDir: dir.path,
    async stop() {
      await server.kill("SIGKILL");
      dir.remove();
    },
  });
}

// Resident memory of a process, in KiB.
export function rssKb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

// GET /healthz on a connection of its own (no pooled socket that an attack could have poisoned); resolves with
// the milliseconds it took, or rejects after `timeoutMs`.
export function healthMs(url: string, timeoutMs = 5_000): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.get(`${url}/healthz`, { agent: false, timeout: timeoutMs }, (res) => {
      res.resume();
      res.on("end", () => (res.statusCode === 200 ? resolve(performance.now() - started) : reject(new Error(`healthz ${res.statusCode}`))));
    });
    req.on("timeout", () => req.destroy(new Error(`healthz did not answer in ${timeoutMs} ms`)));
    req.on("error", reject);
  });
}

// The slowest /healthz answer allowed while an attack runs (the bound), for every attack: bursts of
// calls connect-node serves, each about 0.3-1 ms of one core, are started and ended a few a turn
// (src/transport/fair-turns.ts), and floods are counted before they are decoded (src/transport/limits/).
export const HEALTH_BOUND_MS = 100;

// Runs `attack` while a separate process probes /healthz every 25 ms (health-probe.ts); returns the slowest
// probe.
export async function slowestHealthDuring(url: string, attack: () => Promise<void>): Promise<number> {
  const probe = spawn(process.execPath, ["--import", "tsx", "test/hostile/health-probe.ts", url], { stdio: ["pipe", "pipe", "inherit"] });
  if (probe.pid !== undefined) atNormalPriority(probe.pid);
  let output = "";
  probe.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => probe.once("exit", () => resolve()));
  while (!output.includes("ready\n")) {
    if (probe.exitCode !== null) throw new Error("the health probe exited before its first probe");
    await new Promise((r) => setTimeout(r, 20));
  }
  try {
    await attack();
  } finally {
    probe.stdin.end();
    await exited;
  }
  const slowest = Number(output.split("\n")[1]);
  if (!Number.isFinite(slowest)) throw new Error(`the health probe reported no figure: ${output}`);
  // HOSTILE_FIGURES=1 prints each figure, for docs/robustness.md.
  if (process.env.HOSTILE_FIGURES !== undefined) console.log(`[figures] ${expect.getState().currentTestName ?? "?"}: slowest /healthz ${slowest.toFixed(1)} ms`);
  return slowest;
}

// The server is still up and serves an ordinary caller: /healthz within the bound, and a key created and
// used for a round trip of Encrypt and Decrypt over REST, as the admin (restCall sends its token).
export async function expectServing(target: Target, healthBoundMs = 100): Promise<void> {
  expect(target.running()).toBe(true);
  // The first probe after an attack may meet a collection of what the attack left behind; the bound is for
  // the best of three, taken right after one another.
  const probes = [await healthMs(target.url), await healthMs(target.url), await healthMs(target.url)];
  expect(Math.min(...probes)).toBeLessThan(healthBoundMs);
  const key = await restCall(target.url, "POST", "/v1/keys", { parentId: "hostile-check" });
  const plaintext = Buffer.from("still serving").toString("base64");
  const sealed = await restCall(target.url, "POST", "/v1/encrypt", { keyId: key.id as string, keyVersionId: 1, plaintext });
  const opened = await restCall(target.url, "POST", "/v1/decrypt", { keyId: key.id as string, ciphertext: sealed.ciphertext as string });
  expect(opened.plaintext).toBe(plaintext);
}

// Waits up to `withinMs` for the server's RSS to fall under `boundKb` (memory an attack held must be given back
// once the attackers are gone); fails with the last reading.
export async function expectRssUnder(target: Target, boundKb: number, withinMs = 10_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  let rss = rssKb(target.pid);
  while (rss > boundKb && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    rss = rssKb(target.pid);
  }
  expect(rss, `RSS of the server in KiB`).toBeLessThan(boundKb);
}
