import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { create, toBinary } from "@bufbuild/protobuf";
import { CreateCryptoKeyRequestSchema } from "../gen/kms/v1/kms_pb.js";
import { newKeyId } from "../src/kms/key-manager.js";
import { MasterKey } from "../src/kms/master-key.js";
import { keyParams, poolParams, taskParams, versionParams } from "../src/storage/rows.js";
import { compile } from "./lib/build.js";
import { renderPngs } from "./lib/charts.js";
import type { Chart } from "./lib/charts.js";
import { killAll, killAllSync, startChild } from "./lib/children.js";
import type { Child } from "./lib/children.js";
import { ensureH2load } from "./lib/h2load.js";
import { grpcFrame } from "./lib/payloads.js";
import { START_FLAGS, freePort } from "./lib/servers.js";
import { cpuSeconds, peakRssBytes, rssBytes } from "./lib/proc.js";
import { postgresStore, sqliteStore } from "./lib/scale-stores.js";
import type { Rows, ScaleStore } from "./lib/scale-stores.js";

// `npm run bench:scale` (issue 14): how the cost of the work grows with the store. One server's store (the embedded
// one, or a new PostgreSQL database with --store postgres) is grown through the sizes asked (1k, 10k, 100k, 1M keys
// by default), with versions and node pool tasks in the proportions below, written straight into the database while
// the server is stopped (the growth is not what is measured). At each size the server is restarted and every figure
// is taken through the API (REST over HTTP/1.1 keep-alive, every answer checked). Writes
// bench/results/scale-<store>.json and one PNG chart per figure, with every store measured so far side by side. See
// docs/performance.md for what the figures mean and what they showed.

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

const { values: flags } = parseArgs({
  options: {
    sizes: { type: "string", default: "1000,10000,100000,1000000" },
    duration: { type: "string", default: "3" },
    concurrency: { type: "string", default: "64" },
    "cache-size": { type: "string", default: "100000" },
    out: { type: "string", default: join(root, "bench", "results") },
    // After the last size: Encrypt with every key once, to show the cache bound holding over a whole sweep.
    sweep: { type: "boolean", default: false },
    // How many keys the sweep uses (0: all), for a machine too slow to sweep a million in the time it has.
    "sweep-keys": { type: "string", default: "0" },
    // Node flags for the server instead of those of `npm start` (START_FLAGS), to see what a V8 setting does.
    "server-flags": { type: "string", default: "" },
    // postgres: a new database on the server CLOUDPLANE_TEST_DATABASE_URL names (dropped after the run).
    store: { type: "string", default: "sqlite" },
    // Only draws the charts again from the JSON files in --out.
    "charts-only": { type: "boolean", default: false },
    help: { type: "boolean", default: false },
  },
  strict: true,
});
if (flags.help) {
  process.stdout.write(
    "Usage: npm run bench:scale -- [--sizes 1000,10000,100000,1000000] [--duration S (3)] [--concurrency N (64)] [--cache-size KEYS (100000)] [--out DIR] [--sweep [--sweep-keys N]] [--store sqlite|postgres] [--server-flags='NODE FLAGS'] [--charts-only]\n",
  );
  process.exit(0);
}
const sizes = flags.sizes.split(",").map(Number);
const durationMs = Number(flags.duration) * 1000;
const concurrency = Number(flags.concurrency);
const cacheSize = Number(flags["cache-size"]);
if (flags.store !== "sqlite" && flags.store !== "postgres") throw new Error("--store is sqlite or postgres");
const adminUrl = process.env.CLOUDPLANE_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
if (sizes.some((s) => !Number.isInteger(s) || s < 1) || !(durationMs > 0) || !(concurrency >= 1) || !(cacheSize >= 1)) {
  throw new Error("--sizes, --duration, --concurrency and --cache-size must be positive");
}

// Realistic proportions: one key in two has a second version (a rotation), one node pool per 100 keys, each with the
// task that created it and one that scaled it.
const SECOND_VERSION_EVERY = 2;
const KEYS_PER_POOL = 100;
const NAMESPACE = "bench";
// The working set that fits the cache.
const HOT_KEYS = Math.min(10_000, cacheSize);
const PAGE = 100;
const masterKeyBytes = randomBytes(32);
const masterKey = new MasterKey(masterKeyBytes);

// Wall-clock figures follow the load of the machine (shared with other work); the server's own CPU time per call
// or until ready does much less, and is what the ratios are judged on.
interface Row {
  keys: number;
  versions: number;
  tasks: number;
  readyMs: number;
  readyCpuMs: number;
  rssIdleMiB: number;
  encryptHotPerSecond: number;
  rssHotMiB: number;
  encryptUniformPerSecond: number;
  encryptUniformVsHot: number;
  encryptHotCpuUs: number;
  encryptUniformCpuUs: number;
  // encryptHotCpuUs / encryptUniformCpuUs: the throughput ratio of a server that has the CPU to itself.
  encryptUniformVsHotByCpu: number;
  peakRssDuringUniformMiB: number;
  rssAfterUniformMiB: number;
  getCryptoKeyPerSecond: number;
  listFirstPageMs: number;
  listDeepPageColdMs: number;
  listDeepPageMs: number;
  listDeepVsFirst: number;
  createCryptoKeyPerSecond: number;
  // The same over gRPC from h2load (64 connections, one call at a time on each), which costs the machine's other
  // core far less than the closed loop in this process: what the server can create, not what this process can ask.
  createCryptoKeyGrpcPerSecond: number;
  createCryptoKeyGrpcCpuUs: number;
  createCryptoKeyCpuUs: number;
  createCryptoKeyVersionPerSecond: number;
  databaseMiB: number;
}

// Grows the store to `target` keys, in batches of 10,000. Returns the ids added.
async function grow(store: ScaleStore, from: number, target: number, owner: string): Promise<string[]> {
  const ids: string[] = [];
  const base = Date.now() - 365 * 24 * 3600 * 1000;
  for (let startAt = from; startAt < target; startAt += 10_000) {
    const rows: Rows = { keys: [], versions: [], pools: [], tasks: [] };
    for (let i = startAt; i < Math.min(target, startAt + 10_000); i++) {
      const at = base + i;
      // As the server makes them, from the creation time.
      const id = newKeyId(at);
      ids.push(id);
      const versions = i % SECOND_VERSION_EVERY === 0 ? 2 : 1;
      rows.keys.push(
        keyParams({
          id, parentId: NAMESPACE, name: `key-${i}`, description: "", owner, labels: ["team=bench"], rotationPeriodMs: null, nextRotationAt: null,
          defaultAlgorithm: "AES_256", primaryVersionId: versions, nextVersionId: versions + 1, createdAt: at, goneAt: null,
        }),
      );
      for (let v = 1; v <= versions; v++) {
        rows.versions.push(
          versionParams({
            keyId: id, id: v, state: "ENABLED", algorithm: "AES_256", createdAt: at, destroyAt: null,
            wrappedMaterial: masterKey.wrap(randomBytes(32), id, v),
          }),
        );
      }
      if (i % KEYS_PER_POOL === 0) {
        const pool = {
          id: `pool-${i}`, serviceInstanceId: "bench-vdc", clusterId: "bench-cluster", name: `pool-${i}`, computeFlavor: "bench.small",
          count: 3, state: "RUNNING" as const, activeTaskId: null, pendingName: null, createdAt: at, modifiedAt: at,
        };
        rows.pools.push(poolParams(pool));
        for (const [n, command] of (["CreateNodePool", "UpdateNodePool"] as const).entries()) {
          rows.tasks.push(
            taskParams({
              id: `task-${i}-${n}`, command, status: "SUCCEEDED", serviceInstanceId: "bench-vdc", clusterId: "bench-cluster", nodePoolId: pool.id,
              change: { name: null, count: 3, stateIfFailed: "ERROR" }, createdBy: owner, createdAt: at, modifiedAt: at, failure: null,
              result: pool, attempts: 1,
            }),
          );
        }
      }
    }
    await store.insert(rows);
  }
  return ids;
}

interface Server {
  child: Child;
  url: string;
  headers: Record<string, string>;
  readyMs: number;
  readyCpuMs: number;
}

const serverFlags = flags["server-flags"] === "" ? START_FLAGS : flags["server-flags"].split(/\s+/);

// Starts the compiled server and times it from the spawn to its "listening" line (what an orchestrator waits for).
async function start(buildDir: string, dataDir: string, store: ScaleStore): Promise<Server> {
  const port = await freePort();
  const started = performance.now();
  // The orphan guard ends the server if this process dies without killing it.
  const guard = pathToFileURL(join(buildDir, "bench", "lib", "orphan-guard.js")).href;
  const child = startChild("cloudplane", process.execPath, ["--import", guard, ...serverFlags, join(buildDir, "src", "main.js")], {
    cwd: root,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      DATA_DIR: dataDir,
      MASTER_KEY: masterKeyBytes.toString("base64"),
      KEY_CACHE_SIZE: String(cacheSize),
      LOG_LEVEL: "info",
      ...store.env,
    },
  });
  await child.waitForLine((line) => (line.includes("cloudplane listening") ? true : undefined), 120_000);
  const readyMs = performance.now() - started;
  const readyCpuMs = (cpuSeconds(child.pid) ?? 0) * 1000;
  const url = `http://127.0.0.1:${port}`;
  const credentials = readFileSync(join(dataDir, "admin-credentials.json"), "utf8");
  const reply = await fetch(`${url}/public/v2/service_auth`, { method: "POST", headers: { "content-type": "application/json" }, body: credentials });
  const token = ((await reply.json()) as { token: { access_token: string } }).token.access_token;
  return { child, url, readyMs, readyCpuMs, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } };
}

async function call(server: Server, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${server.url}${path}`, { method, headers: server.headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status !== 200) throw new Error(`${method} ${path} answered ${res.status}: ${JSON.stringify(json).slice(0, 300)}`);
  return json;
}

// `concurrency` callers in a closed loop for the duration; calls per second.
async function load(once: (caller: number) => Promise<unknown>, callers = concurrency, ms = durationMs): Promise<number> {
  let calls = 0;
  const started = performance.now();
  const end = started + ms;
  await Promise.all(
    Array.from({ length: callers }, async (_, caller) => {
      while (performance.now() < end) {
        await once(caller);
        calls++;
      }
    }),
  );
  return calls / ((performance.now() - started) / 1000);
}

// Two loads whose ratio matters, in alternating half-second windows for twice the duration, so that a change of the
// machine's load (it is shared) weighs on both alike.
async function loadPair(pid: number, a: () => Promise<unknown>, b: () => Promise<unknown>): Promise<[Measured, Measured]> {
  const runs: [Measured[], Measured[]] = [[], []];
  for (let round = 0; round < Math.max(1, Math.round(durationMs / 500)); round++) {
    runs[0].push(await measured(pid, a, 500));
    runs[1].push(await measured(pid, b, 500));
  }
  const mean = (list: Measured[]): Measured => ({
    perSecond: list.reduce((x, m) => x + m.perSecond, 0) / list.length,
    cpuUs: list.reduce((x, m) => x + m.cpuUs, 0) / list.length,
  });
  return [mean(runs[0]), mean(runs[1])];
}

interface Measured {
  perSecond: number;
  // The server's CPU time (user + system, every thread) per call.
  cpuUs: number;
}

async function measured(pid: number, once: () => Promise<unknown>, ms = durationMs): Promise<Measured> {
  const cpu = cpuSeconds(pid) ?? 0;
  const started = performance.now();
  const perSecond = await load(once, concurrency, ms);
  const calls = perSecond * ((performance.now() - started) / 1000);
  return { perSecond, cpuUs: (((cpuSeconds(pid) ?? 0) - cpu) * 1e6) / Math.max(1, calls) };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

// CreateCryptoKey over gRPC from h2load, 64 connections with one call at a time each (the 64 concurrent
// callers): a warm-up, then a measured run of a fixed number of calls, with the server's CPU time. Every create is
// then counted in the database: h2load cannot read grpc-status, so a refused create must show as a missing key.
async function createsOverGrpc(server: Server, store: ScaleStore, parentId: string): Promise<Measured> {
  const h2load = await ensureH2load();
  const dir = mkdtempSync(join(os.tmpdir(), "cloudplane-scale-grpc-"));
  try {
    const bodyFile = join(dir, "create.bin");
    writeFileSync(bodyFile, grpcFrame(toBinary(CreateCryptoKeyRequestSchema, create(CreateCryptoKeyRequestSchema, { parentId }))));
    const run = (requests: number) =>
      execFileSync(
        h2load,
        ["-n", String(requests), "-c", String(concurrency), "-m", "1", "-t", "1", "-d", bodyFile,
          "-H", "content-type: application/grpc", "-H", "te: trailers", "-H", `authorization: ${server.headers.authorization}`,
          `${server.url}/kms.v1.KeyManagerService/CreateCryptoKey`],
        { encoding: "utf8" },
      );
    const warmUp = 2_000;
    const calls = Math.max(5_000, Math.round((durationMs / 1000) * 4_000));
    run(warmUp);
    const cpu = cpuSeconds(server.child.pid) ?? 0;
    const started = performance.now();
    run(calls);
    const seconds = (performance.now() - started) / 1000;
    const cpuUs = (((cpuSeconds(server.child.pid) ?? 0) - cpu) * 1e6) / calls;
    const stored = await store.scalar<number>(`SELECT count(*) FROM kms_keys WHERE parent_id = '${parentId}'`);
    if (Number(stored) !== warmUp + calls) throw new Error(`${warmUp + calls} creates over gRPC stored ${stored} keys`);
    return { perSecond: calls / seconds, cpuUs };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

const mib = (bytes: number | null) => (bytes ?? 0) / (1 << 20);
const pick = <T>(list: T[]): T => list[Math.floor(Math.random() * list.length)]!;

async function measure(buildDir: string, dataDir: string, store: ScaleStore, ids: string[]): Promise<Row> {
  const server = await start(buildDir, dataDir, store);
  try {
    const pid = server.child.pid;
    const keys = ids.length;
    await new Promise((r) => setTimeout(r, 1000));
    const rssIdle = rssBytes(pid);
    const plaintext = randomBytes(1024).toString("base64");
    const encrypt = (keyId: string) => call(server, "POST", "/v1/encrypt", { keyId, keyVersionId: 1, plaintext });

    // The hot working set: loaded once, then measured.
    const hot = ids.slice(0, Math.min(HOT_KEYS, keys));
    for (let i = 0; i < hot.length; i += concurrency) await Promise.all(hot.slice(i, i + concurrency).map(encrypt));
    const rssHot = rssBytes(pid);
    // Uniform over every key: larger than the cache once there are more keys than it holds.
    const [encryptHot, encryptUniform] = await loadPair(
      pid,
      () => encrypt(pick(hot)),
      () => encrypt(pick(ids)),
    );
    const peakUniform = peakRssBytes(pid);
    const rssUniform = rssBytes(pid);

    const getKey = await load(() => call(server, "GET", `/v1/keys/${pick(hot)}`));

    const list = (offset: number) => async () => {
      const page = await call(server, "GET", `/v1/keys?parentId=${NAMESPACE}&page.limit=${PAGE}&page.offset=${offset}`);
      if ((page.keys as unknown[]).length !== Math.min(PAGE, Math.max(0, keys - offset))) throw new Error(`page at ${offset} is short`);
    };
    const deep = Math.max(0, keys - PAGE);
    const firstPage = median(await seq(21, list(0)));
    // The first deep read finds no recorded position; later ones (a client coming back, or paging on) seek.
    const deepCold = await timed(list(deep));
    const deepWarm = median(await seq(20, list(deep)));

    // Versions of keys of their own (one per caller: versions of one key are made one after another by design), so
    // that the keys measured above keep their proportions.
    const versioned: string[] = [];
    for (let c = 0; c < concurrency; c++) versioned.push(String((await call(server, "POST", "/v1/keys", { parentId: "bench-versions" })).id));
    const versionsPerSecond = await load((c) => call(server, "POST", `/v1/keys/${versioned[c]}/versions`, {}));
    let created = 0;
    const creates = await measured(pid, () => call(server, "POST", "/v1/keys", { parentId: "bench-created", name: `created-${keys}-${created++}` }));
    const grpcCreates = await createsOverGrpc(server, store, `bench-created-grpc-${keys}`);

    return {
      keys,
      versions: await store.scalar<number>("SELECT count(*) FROM kms_versions"),
      tasks: await store.scalar<number>("SELECT count(*) FROM compute_tasks"),
      readyMs: server.readyMs,
      readyCpuMs: server.readyCpuMs,
      rssIdleMiB: mib(rssIdle),
      encryptHotPerSecond: encryptHot.perSecond,
      rssHotMiB: mib(rssHot),
      encryptUniformPerSecond: encryptUniform.perSecond,
      encryptUniformVsHot: encryptUniform.perSecond / encryptHot.perSecond,
      encryptHotCpuUs: encryptHot.cpuUs,
      encryptUniformCpuUs: encryptUniform.cpuUs,
      encryptUniformVsHotByCpu: encryptHot.cpuUs / encryptUniform.cpuUs,
      peakRssDuringUniformMiB: mib(peakUniform),
      rssAfterUniformMiB: mib(rssUniform),
      getCryptoKeyPerSecond: getKey,
      listFirstPageMs: firstPage,
      listDeepPageColdMs: deepCold,
      listDeepPageMs: deepWarm,
      listDeepVsFirst: deepWarm / firstPage,
      createCryptoKeyPerSecond: creates.perSecond,
      createCryptoKeyCpuUs: creates.cpuUs,
      createCryptoKeyGrpcPerSecond: grpcCreates.perSecond,
      createCryptoKeyGrpcCpuUs: grpcCreates.cpuUs,
      createCryptoKeyVersionPerSecond: versionsPerSecond,
      databaseMiB: mib(await store.bytes()),
    };
  } finally {
    await server.child.kill(10_000);
  }
}

interface Sweep {
  keys: number;
  seconds: number;
  perSecond: number;
  rssStartMiB: number;
  rssMaxMiB: number;
  rssEndMiB: number;
  // RSS every 5 % of the sweep.
  rssMiBAt: { done: number; rssMiB: number }[];
}

// Encrypt once with every key, in order, from a server just restarted: the cache fills up to its bound and then
// evicts; RSS is read as it goes.
async function sweep(buildDir: string, dataDir: string, store: ScaleStore, ids: string[]): Promise<Sweep> {
  const server = await start(buildDir, dataDir, store);
  try {
    const pid = server.child.pid;
    const plaintext = randomBytes(1024).toString("base64");
    const rssStart = mib(rssBytes(pid));
    const samples: { done: number; rssMiB: number }[] = [];
    let next = 0;
    let done = 0;
    let max = rssStart;
    const step = Math.ceil(ids.length / 20);
    const started = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (let i = next++; i < ids.length; i = next++) {
          await call(server, "POST", "/v1/encrypt", { keyId: ids[i], keyVersionId: 1, plaintext });
          done++;
          if (done % 1000 === 0) max = Math.max(max, mib(rssBytes(pid)));
          if (done % step === 0) samples.push({ done, rssMiB: mib(rssBytes(pid)) });
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    return { keys: ids.length, seconds, perSecond: ids.length / seconds, rssStartMiB: rssStart, rssMaxMiB: Math.max(max, mib(peakRssBytes(pid))), rssEndMiB: mib(rssBytes(pid)), rssMiBAt: samples };
  } finally {
    await server.child.kill(10_000);
  }
}

async function seq(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(await timed(fn));
  return out;
}

function gitCommit(): string {
  try {
    const commit = execFileSync("git", ["rev-parse", "HEAD"], { cwd: root, encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: root, encoding: "utf8" }).trim() !== "";
    return dirty ? `${commit}+uncommitted` : commit;
  } catch {
    return "unknown";
  }
}

interface Result {
  commit: string;
  measuredAt: string;
  machine: { cpus: number; model: string; loadAverage: number[] };
  settings: { concurrency: number; durationMs: number; cacheSize: number; hotKeys: number; page: number; store: string };
  rows: Row[];
  sweep: Sweep | null;
}

// One chart per figure, with the series of every store measured so far (bench/results/scale-<store>.json) side by
// side.
function charts(results: Result[], out: string): Chart[] {
  const series = (label: string, y: (r: Row) => number) =>
    results
      .map((result) => ({
        label: results.length > 1 ? `${label} (${result.settings.store})` : label,
        // Rows measured before a figure existed (an older JSON) have no point for it.
        points: result.rows.map((r) => ({ x: r.keys, y: y(r) })).filter((p) => Number.isFinite(p.y)),
      }))
      .filter((s) => s.points.length > 0);
  const file = (name: string) => join(out, `scale-${name}.png`);
  const sweeps = results
    .filter((r) => r.sweep !== null)
    .map((r) => ({ label: `${r.settings.store}: ${r.sweep!.keys.toLocaleString("en-US")} keys swept, peak ${r.sweep!.rssMaxMiB.toFixed(0)} MiB`, points: r.sweep!.rssMiBAt.map((p) => ({ x: p.done, y: p.rssMiB })) }));
  return [
    {
      file: file("ready"), title: "Time to ready after a restart", yLabel: "ms",
      series: [...series("spawn to listening, wall clock", (r) => r.readyMs), ...series("server CPU time until listening", (r) => r.readyCpuMs)],
      target: { y: 1000, label: "target: under 1 s" },
    },
    {
      file: file("rss"), title: "Resident memory", yLabel: "MiB",
      series: [...series("idle after restart", (r) => r.rssIdleMiB), ...series("hot set cached", (r) => r.rssHotMiB), ...series("peak during uniform Encrypt", (r) => r.peakRssDuringUniformMiB)],
      target: { y: 200, label: "target: 200 MiB with 100k keys cached" },
    },
    {
      file: file("encrypt"), title: "Encrypt 1 KiB throughput", yLabel: "calls/s",
      series: [...series(`hot set (${HOT_KEYS} keys, cached)`, (r) => r.encryptHotPerSecond), ...series("uniform over all keys", (r) => r.encryptUniformPerSecond)],
    },
    {
      file: file("encrypt-cpu"), title: "Encrypt 1 KiB: server CPU time per call", yLabel: "µs per call",
      series: [...series(`hot set (${HOT_KEYS} keys, cached)`, (r) => r.encryptHotCpuUs), ...series("uniform over all keys", (r) => r.encryptUniformCpuUs)],
    },
    { file: file("get-key"), title: "GetCryptoKey throughput", yLabel: "calls/s", series: series("GetCryptoKey", (r) => r.getCryptoKeyPerSecond) },
    {
      file: file("list"), title: `ListCryptoKeys latency (page of ${PAGE})`, yLabel: "ms (log)", logY: true,
      series: [...series("first page", (r) => r.listFirstPageMs), ...series("last page, first read", (r) => r.listDeepPageColdMs), ...series("last page, read again", (r) => r.listDeepPageMs)],
    },
    {
      file: file("creates"), title: `Durable creates, ${concurrency} concurrent callers`, yLabel: "calls/s",
      series: [...series("CreateCryptoKey", (r) => r.createCryptoKeyPerSecond), ...series("CreateCryptoKey over gRPC (h2load)", (r) => r.createCryptoKeyGrpcPerSecond), ...series("CreateCryptoKeyVersion", (r) => r.createCryptoKeyVersionPerSecond)],
      target: { y: 4500, label: "target: 5x the 900/s of one fsync per create" },
    },
    { file: file("db-size"), title: "Database size on disk", yLabel: "MiB", series: series("database files", (r) => r.databaseMiB) },
    ...(sweeps.length === 0
      ? []
      : [
          {
            file: file("sweep"), title: `RSS while Encrypt uses every key once (a cache of ${results[0]!.settings.cacheSize.toLocaleString("en-US")} keys)`, yLabel: "MiB",
            xLabel: "keys swept so far (log scale)", series: sweeps, target: { y: 200, label: "target: 200 MiB" },
          },
        ]),
  ];
}

function readResult(path: string): Result | null {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as Result;
  } catch {
    return null;
  }
}

async function main(): Promise<void> {
  if (flags["charts-only"]) {
    const results = ["sqlite", "postgres"].map((name) => readResult(join(flags.out, `scale-${name}.json`))).filter((r) => r !== null);
    await renderPngs(charts(results, flags.out));
    return;
  }
  const build = await compile(root);
  if (build.typeErrors !== null) process.stdout.write("note: tsc reported type errors; measuring what it emitted\n");
  const dataDir = mkdtempSync(join(os.tmpdir(), "cloudplane-bench-scale-"));
  mkdirSync(flags.out, { recursive: true });
  const store = flags.store === "postgres" ? await postgresStore(adminUrl, `cloudplane_bench_scale_${randomBytes(5).toString("hex")}`) : sqliteStore(dataDir);
  const resultFile = (name: string) => join(flags.out, `scale-${name}.json`);
  const result: Result = {
    commit: gitCommit(),
    measuredAt: new Date().toISOString(),
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model ?? "", loadAverage: os.loadavg() },
    settings: { concurrency, durationMs, cacheSize, hotKeys: HOT_KEYS, page: PAGE, store: store.name },
    rows: [],
    sweep: null,
  };
  const write = async () => {
    result.machine.loadAverage = os.loadavg();
    writeFileSync(resultFile(store.name), `${JSON.stringify(result, null, 2)}\n`);
    const other = readResult(resultFile(store.name === "sqlite" ? "postgres" : "sqlite"));
    const all = other === null ? [result] : store.name === "sqlite" ? [result, other] : [other, result];
    await renderPngs(charts(all, flags.out));
  };
  try {
    // The first start makes the database and the admin account.
    const first = await start(build.dir, dataDir, store);
    const admin = await store.scalar<string>("SELECT id FROM identity_service_accounts LIMIT 1");
    await first.child.kill(10_000);
    const ids: string[] = [];
    for (const size of sizes) {
      const t = performance.now();
      for (const id of await grow(store, ids.length, size, admin)) ids.push(id);
      process.stdout.write(`grew the store to ${size} keys in ${((performance.now() - t) / 1000).toFixed(1)} s\n`);
      const row = await measure(build.dir, dataDir, store, ids);
      result.rows.push(row);
      process.stdout.write(`${JSON.stringify(row)}\n`);
      await write();
    }
    if (flags.sweep) {
      const sweepKeys = Number(flags["sweep-keys"]);
      result.sweep = await sweep(build.dir, dataDir, store, sweepKeys > 0 ? ids.slice(0, sweepKeys) : ids);
      process.stdout.write(`${JSON.stringify(result.sweep)}\n`);
      await write();
    }
  } finally {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

process.on("SIGINT", () => {
  killAllSync();
  process.exit(130);
});
main().then(
  () => killAll(),
  async (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    await killAll();
    process.exitCode = 1;
  },
);
