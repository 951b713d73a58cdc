import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { compile } from "./lib/build.js";
import { killAll, killAllSync, runToEnd } from "./lib/children.js";
import { KmsClient } from "./lib/grpc-client.js";
import { ensureH2load, runH2load } from "./lib/h2load.js";
import { takeLock } from "./lib/lock.js";
import type { LoadResult } from "./lib/h2load.js";
import type { Body } from "./lib/payloads.js";
import { cpuBusySeconds, cpuSeconds, peakRssBytes } from "./lib/proc.js";
import { profileShares } from "./lib/profile-shares.js";
import { checkTarget, memoryTable, profileTable, resultsTable } from "./lib/report.js";
import type { Row, TargetCheck } from "./lib/report.js";
import { allScenarios, label } from "./lib/scenarios.js";
import type { Scenario, Subject } from "./lib/scenarios.js";
import { ACCESS_STAGES_OFF, KMS_RATE_LIMITED, METRICS_OFF, PIPELINE_STAGES_OFF, startBaseline, startCloudplane } from "./lib/servers.js";
import { post } from "./lib/http-client.js";
import type { LaunchOptions, ServerName } from "./lib/servers.js";

// `npm run bench`: cloudplane against servers that do the same AES-256-GCM work with less machinery, under h2load,
// each scenario of lib/scenarios.ts side by side in the same rounds: gRPC Encrypt and Decrypt at 1 KiB and 64 KiB
// against a plain @grpc/grpc-js server and a bare node:http2 handler, gRPC GetCryptoKey against grpc-js, REST
// Encrypt over HTTP/1.1 against a bare node:http endpoint, Connect and gRPC-web Encrypt (reported), and the cost of
// the call pipeline's stages. Targets from issue 8. Prints a table, writes .bench/last.json, exits 1 when a target
// is missed or a run is not clean. See bench/README.md.

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

const { values: flags } = parseArgs({
  options: {
    duration: { type: "string", default: "2" },
    warmup: { type: "string", default: "3" },
    rounds: { type: "string", default: "3" },
    windows: { type: "string", default: "4" },
    clients: { type: "string", default: "8" },
    streams: { type: "string", default: "32" },
    "h1-connections": { type: "string", default: "64" },
    only: { type: "string", default: "" },
    unpinned: { type: "boolean", default: false },
    "cpu-prof": { type: "boolean", default: false },
    candidate: { type: "string", default: "" },
    "candidate-flags": { type: "string", default: "" },
    idle: { type: "string", default: "0" },
    help: { type: "boolean", default: false },
  },
  strict: true,
});

if (flags.help) {
  process.stdout.write(`Usage: npm run bench -- [flags]
  --rounds N       start every server N times afresh, in alternating server order (default 3)
  --windows N      measured windows per scenario, server and round, back to back after one warm-up; the table
                   reports the median of all windows of all rounds (default 4)
  --duration S     measured seconds per window (default 2)
  --warmup S       warm-up seconds before a scenario's first window on each server (default 3)
  --clients N      h2load connections for the h2c scenarios (default 8)
  --streams N      concurrent streams per connection for the h2c scenarios (default 32)
  --h1-connections N
                   HTTP/1.1 keep-alive connections for the REST scenario, one request at a time each (default 64)
  --only LIST      comma-separated scenarios (default: all):
${allScenarios.map((s) => `                     ${s.id.padEnd(20)} ${label(s)}: ${s.servers.join(", ")}`).join("\n")}
  --idle S         leave every server idle for S seconds before each measured run, after the load before it: how
                   a server does when traffic comes back after a pause (V8's memory reducer runs after ~15 s)
  --unpinned       do not pin the servers to CPU 0 and h2load to CPU 1
  --cpu-prof       write a V8 CPU profile of every server to .bench/profiles/<server>-round<n>.cpuprofile, and
                   print where each one's busy CPU went by area of the code (the stages, transport, kms, node, gc)
  --candidate PATH also measure another cloudplane entry point, e.g. a patched copy of src/main.js (path inside the
                   compiled tree), as the server "candidate", side by side with src/main.js
  --candidate-flags="FLAGS"
                   node flags for the candidate only (e.g. --candidate-flags="--max-semi-space-size=64"); with no --candidate,
                   the candidate is src/main.js itself
`);
  process.exit(0);
}

function positive(name: string, raw: string | undefined): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got ${raw}`);
  return n;
}

function nonNegative(name: string, raw: string | undefined): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a whole number of seconds, got ${raw}`);
  return n;
}

const settings = {
  durationS: positive("duration", flags.duration),
  warmupS: positive("warmup", flags.warmup),
  rounds: positive("rounds", flags.rounds),
  windows: positive("windows", flags.windows),
  clients: positive("clients", flags.clients),
  streams: positive("streams", flags.streams),
  h1Connections: positive("h1-connections", flags["h1-connections"]),
  idleS: nonNegative("idle", flags.idle),
  // Two cores: the servers take CPU 0 (only one of them is under load at a time), h2load takes CPU 1.
  pinned: !flags.unpinned && os.availableParallelism() >= 2,
};
const SERVER_CPU = settings.pinned ? "0" : null;
const LOAD_CPU = settings.pinned ? "1" : null;
// Above this share of the servers' CPU taken by other processes (or the hypervisor), a run is flagged as noisy.
const NOISY_PERCENT = 10;

const candidateFlags = flags["candidate-flags"].split(" ").filter((f) => f !== "");
const candidate =
  flags.candidate !== "" || candidateFlags.length > 0 ? { entry: flags.candidate === "" ? "src/main.js" : flags.candidate, flags: candidateFlags } : null;
const only = flags.only.split(",").filter((id) => id !== "");
const unknown = only.filter((id) => !allScenarios.some((s) => s.id === id));
if (unknown.length > 0) throw new Error(`--only: no scenario ${unknown.join(", ")} (--help lists them)`);
const scenarios = allScenarios.filter((s) => only.length === 0 || only.includes(s.id));

// The servers of a scenario: its own, and a candidate wherever cloudplane runs.
function serversOf(scenario: Scenario): ServerName[] {
  return candidate !== null && scenario.servers.includes("cloudplane") ? [...scenario.servers, "candidate"] : scenario.servers;
}

// Every server another is compared with, in the order of the table's columns.
const REFERENCES: ServerName[] = ["grpc-js", "http2", "http1", "no-stages", "no-access", "no-metrics"];

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

// h2load sees HTTP statuses only, and every gRPC answer is a 200: a clean run also needs every request to have
// finished and to have brought back a full response message (a trailers-only error carries none).
function problems(result: LoadResult, body: Body): string[] {
  const out: string[] = [];
  if (result.done === 0) out.push("no request finished");
  if (result.failed + result.errored + result.timeout > 0) out.push(`${result.failed} failed, ${result.errored} errored, ${result.timeout} timed out`);
  if (result.succeeded !== result.done) out.push(`${result.done - result.succeeded} of ${result.done} not successful`);
  if (result.statusOther > 0) out.push(`${result.statusOther} non-2xx statuses`);
  // h2load counts the bytes of the measured window only, so the quotient is a little off; an error answer would be
  // tens of bytes against the kilobytes of a real one.
  if (result.receivedPerRequest < body.responseBytes * 0.5) {
    out.push(`received ${result.receivedPerRequest.toFixed(0)} bytes per request, a correct answer carries ${body.responseBytes}`);
  }
  return out;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

interface Measurement {
  result: LoadResult;
  cpuPercent: number;
  // CPU 0 time used by anything but the server under load, steal included (pinned runs only).
  foreignPercent: number | null;
}

// The id the baselines answer to: 20 characters, the length of the ids cloudplane assigns, so that every server
// parses and writes the same amount of key id.
function baselineKeyId(): string {
  return randomBytes(20).toString("base64").replace(/[^a-z0-9]/gi, "x").slice(0, 20).toLowerCase();
}

// Starts one server, creates (cloudplane) or names (baselines) its key, and opens a gRPC client to it (the bare
// REST endpoint speaks no gRPC; its client is never used).
async function startOne(name: ServerName, launch: LaunchOptions, dataDirs: string[], clients: KmsClient[]): Promise<Subject> {
  if (name === "grpc-js" || name === "http2" || name === "http1") {
    const keyId = baselineKeyId();
    const server = await startBaseline(launch, name, keyId);
    const authorization = `Bearer ${madeUpToken()}`;
    const client = new KmsClient(server.port, authorization);
    clients.push(client);
    return { name, server, client, keyId, authorization };
  }
  const dataDir = mkdtempSync(join(os.tmpdir(), "cloudplane-bench-"));
  dataDirs.push(dataDir);
  const server =
    name === "candidate" && candidate !== null
      ? await startCloudplane(launch, "candidate", candidate.entry, dataDir, candidate.flags)
      : name === "no-stages" || name === "no-access" || name === "no-metrics" || name === "kms-limited"
        ? await startCloudplane(launch, name, "src/main.js", dataDir, [], stagesOf[name])
        : await startCloudplane(launch, "cloudplane", "src/main.js", dataDir);
  // As a caller would: the bootstrapped admin's credentials exchanged for a token.
  const authorization = `Bearer ${await adminToken(server.port, dataDir)}`;
  const client = new KmsClient(server.port, authorization);
  clients.push(client);
  const key = await client.createCryptoKey("bench");
  if (key.primary?.id !== 1 || key.primary.algorithm !== "AES_256") throw new Error(`${name} created ${JSON.stringify(key)}, expected an AES_256 primary version 1`);
  return { name, server, client, keyId: key.id, authorization };
}

const stagesOf = { "no-stages": PIPELINE_STAGES_OFF, "no-access": ACCESS_STAGES_OFF, "no-metrics": METRICS_OFF, "kms-limited": KMS_RATE_LIMITED } as const;

// A token of the form and length cloudplane issues, for the baselines to receive and ignore.
function madeUpToken(): string {
  return `cpat.${randomBytes(12).toString("base64url")}.${randomBytes(32).toString("base64url")}`;
}

async function adminToken(port: number, dataDir: string): Promise<string> {
  const credentials = readFileSync(join(dataDir, "admin-credentials.json"));
  const reply = await post({ port, path: "/public/v2/service_auth", headers: { "content-type": "application/json" }, body: credentials, h1: true });
  const token = (JSON.parse(reply.body.toString()) as { token?: { access_token?: string } }).token?.access_token;
  if (reply.status !== 200 || token === undefined) throw new Error(`service_auth answered ${reply.status}: ${reply.body.toString().slice(0, 200)}`);
  return token;
}

async function measure(h2load: string, subject: Subject, scenario: Scenario, body: Body, warmupS: number): Promise<Measurement> {
  const { server: s, authorization } = subject;
  const before = cpuSeconds(s.child.pid) ?? 0;
  const cpu0Before = settings.pinned ? cpuBusySeconds(0) : null;
  const started = performance.now();
  const h1 = scenario.transport === "http1";
  const { result } = scenario.loop !== undefined ? { result: await scenario.loop({ subject, durationS: settings.durationS, warmupS }) } : await runH2load(h2load, {
    url: `http://127.0.0.1:${s.port}${scenario.path}`,
    bodyFile: body.file,
    headers: [...scenario.headers, `authorization: ${authorization}`],
    h1,
    clients: h1 ? settings.h1Connections : settings.clients,
    streams: h1 ? 1 : settings.streams,
    durationS: settings.durationS,
    warmupS,
    cpu: LOAD_CPU,
  });
  const wallS = (performance.now() - started) / 1000;
  const serverS = (cpuSeconds(s.child.pid) ?? 0) - before;
  const cpu0After = cpu0Before === null ? null : cpuBusySeconds(0);
  const foreignPercent =
    cpu0Before === null || cpu0After === null
      ? null
      : Math.max(0, ((cpu0After.busy - cpu0Before.busy - serverS + (cpu0After.steal - cpu0Before.steal)) / wallS) * 100);
  const issues = problems(result, body);
  if (issues.length > 0) throw new Error(`${s.name} ${scenario.id}: unclean run: ${issues.join("; ")}`);
  return { result, cpuPercent: (serverS / wallS) * 100, foreignPercent };
}

function rowsOf(measured: Map<string, Measurement[]>): Row[] {
  const rows: Row[] = [];
  for (const scenario of scenarios) {
    const names = serversOf(scenario);
    const rate = (name: ServerName): number => median(measured.get(`${scenario.id}/${name}`)!.map((m) => m.result.reqPerS));
    // The fixed references, and the server a target of the scenario is measured against (cloudplane itself for the
    // rate-limits row).
    const references = [...new Set([...REFERENCES, ...scenario.targets.map((t) => t.against)])].filter((ref) => names.includes(ref));
    for (const name of names) {
      const ms = measured.get(`${scenario.id}/${name}`)!;
      const reqPerS = rate(name);
      const readings = ms.map((m) => m.result.reqPerS);
      const cpuPercent = median(ms.map((m) => m.cpuPercent));
      const row: Row = {
        scenario: scenario.id,
        protocol: scenario.protocol,
        method: scenario.method,
        payload: scenario.payload,
        server: name,
        reqPerS,
        readings,
        spreadPercent: ((Math.max(...readings) - Math.min(...readings)) / reqPerS) * 100,
        ratios: Object.fromEntries(references.map((ref) => [ref, reqPerS / rate(ref)])),
        meanLatencyMs: median(ms.map((m) => m.result.meanLatencyMs)),
        cpuPercent,
        cpuUsPerRequest: ((cpuPercent / 100) * 1e6) / reqPerS,
        foreignCpuPercent: ms.some((m) => m.foreignPercent === null) ? null : Math.max(...ms.map((m) => m.foreignPercent ?? 0)),
        verdict: null,
      };
      const underTest = (name === "cloudplane" || name === "candidate" || name === "kms-limited") && !scenario.targets.some((t) => t.against === name);
      if (underTest && scenario.targets.length > 0) {
        row.verdict = scenario.targets.every((t) => checkTarget(row, t).pass) ? "PASS" : "FAIL";
      }
      rows.push(row);
    }
  }
  return rows;
}

// Each target of each scenario checked for cloudplane and for a candidate.
function targetChecks(rows: Row[]): TargetCheck[] {
  return scenarios.flatMap((scenario) =>
    rows.filter((r) => r.scenario === scenario.id && r.verdict !== null).flatMap((r) => scenario.targets.map((t) => checkTarget(r, t))),
  );
}

// One line per scenario and server under test: every target with its verdict, or the figure when there is none.
function targetLines(rows: Row[], checks: TargetCheck[]): string[] {
  const names = scenarios.map((scenario) => `${label(scenario)} (${scenario.id})`);
  const width = Math.max(...names.map((n) => n.length));
  return scenarios.flatMap((scenario, i) =>
    rows
      .filter((r) => r.scenario === scenario.id && (r.verdict !== null || ((r.server === "cloudplane" || r.server === "candidate") && scenario.targets.length === 0)))
      .map((r) => {
        const mine = checks.filter((c) => c.scenario === scenario.id && c.server === r.server);
        const what = mine.length === 0 ? `${r.server} ${r.reqPerS.toFixed(0)} req/s, reported (no target)` : mine.map((c) => `${c.text}: ${c.pass ? "PASS" : "FAIL"}`).join("; ");
        return `  ${names[i]!.padEnd(width)}  ${what}`;
      }),
  );
}

// The cost rows again, from the profiles rather than req/s: 1 - busy/cipher of the server without what is measured
// / busy/cipher of the server with it, round by round (the two were started one right after the other), median.
// Only the rows with processes of their own: a process that serves several scenarios has one profile for all.
function costLinesByProfile(rows: Row[], busyPerCipher: Map<string, number | null>): string[] {
  const lines: string[] = [];
  for (const scenario of scenarios.filter((s) => s.ownProcess === true)) {
    for (const target of scenario.targets) {
      if (target.kind !== "cost") continue;
      for (const row of rows.filter((r) => r.scenario === scenario.id && r.verdict !== null)) {
        const costs: number[] = [];
        for (let round = 1; round <= settings.rounds; round++) {
          const without = busyPerCipher.get(`${target.against}-${scenario.id}-round${round}`);
          const withIt = busyPerCipher.get(`${row.server}-${scenario.id}-round${round}`);
          if (typeof without === "number" && typeof withIt === "number") costs.push(1 - without / withIt);
        }
        if (costs.length === 0) continue;
        const each = costs.map((c) => `${(c * 100).toFixed(1)}%`).join(", ");
        lines.push(`  ${target.what} (${scenario.id}), ${row.server}: ${(median(costs) * 100).toFixed(1)}% (rounds: ${each})`);
      }
    }
  }
  return lines;
}

async function main(): Promise<number> {
  mkdirSync(join(root, ".bench"), { recursive: true });
  const unlock = takeLock(join(root, ".bench", "lock"));
  process.on("exit", unlock);
  const h2load = await ensureH2load();
  const h2loadVersion = (await runToEnd("h2load", h2load, ["--version"], 10_000)).output.trim();
  // What was measured: src/ may hold changes not yet committed.
  const commit = (await runToEnd("git", "git", ["rev-parse", "--short", "HEAD"], 10_000, { cwd: root })).output.trim();
  const srcDirty = (await runToEnd("git", "git", ["status", "--porcelain", "--", "src", "gen"], 10_000, { cwd: root })).output.trim() !== "";
  log("compiling src/, gen/ and bench/ into .bench/build ...");
  const build = await compile(root);
  if (build.typeErrors !== null) log(`warning: tsc reported type errors; measuring what it emitted:\n${build.typeErrors}`);

  const benchDir = join(root, ".bench");
  const bodiesDir = join(benchDir, "bodies");
  const logsDir = join(benchDir, "logs");
  const profileDir = join(benchDir, "profiles");
  mkdirSync(bodiesDir, { recursive: true });
  mkdirSync(logsDir, { recursive: true });
  // Only this run's profiles, for the table of their shares at the end.
  if (flags["cpu-prof"]) rmSync(profileDir, { recursive: true, force: true });
  // `tag` names a batch's files apart from the server's main batch in the same round.
  const launchFor = (round: number, tag: string): LaunchOptions => ({
    root,
    buildDir: build.dir,
    cpu: SERVER_CPU,
    nodeFlags: flags["cpu-prof"] ? ["--cpu-prof", "--cpu-prof-dir", profileDir, "--cpu-prof-name", `{name}${tag}-round${round + 1}.cpuprofile`] : [],
  });
  const plaintexts = new Map<number, Buffer>([1024, 65536].map((n) => [n, randomBytes(n)]));
  const aad = randomBytes(32);
  const measured = new Map<string, Measurement[]>();
  const peaks = new Map<ServerName, number>();
  log(
    `h2load -c ${settings.clients} -m ${settings.streams} over h2c, --h1 -c ${settings.h1Connections} -m 1 over HTTP/1.1, ` +
      `--warm-up-time ${settings.warmupS} then ${settings.windows} window(s) of -D ${settings.durationS}, ` +
      `${settings.rounds} round(s), a fresh process per server and round, ${settings.pinned ? "servers on CPU 0, h2load on CPU 1" : "unpinned"}`,
  );
  // Each server is started afresh for its own batch of scenarios and measured back to back, then stopped: two
  // processes of one server differ by up to ±12% here, and a Node server left idle for ~15 s has V8's memory
  // reducer shrink its heap, after which it stays up to 40% slower at 64 KiB (see README). Measured this way every
  // server is in the same state: busy since it started. A scenario marked `ownProcess` gets processes of its own,
  // started one after the other, so the servers it compares are in the same state and measured at the same time.
  // Rounds alternate the order of the batches.
  const order: ServerName[] = ["grpc-js", "http2", "http1", "cloudplane", "no-stages", "no-access", "no-metrics", "kms-limited", "candidate"];
  const names = order.filter((name) => scenarios.some((s) => serversOf(s).includes(name)));
  const batches: { name: ServerName; tag: string; scenarios: Scenario[] }[] = [
    ...names.map((name) => ({ name, tag: "", scenarios: scenarios.filter((s) => s.ownProcess !== true && serversOf(s).includes(name)) })),
    ...scenarios.filter((s) => s.ownProcess === true).flatMap((s) => order.filter((name) => serversOf(s).includes(name)).map((name) => ({ name, tag: `-${s.id}`, scenarios: [s] }))),
  ].filter((b) => b.scenarios.length > 0);
  for (let round = 0; round < settings.rounds; round++) {
    log(`round ${round + 1} of ${settings.rounds}`);
    for (const { name, tag, scenarios: mine } of round % 2 === 0 ? batches : [...batches].reverse()) {
      const clients: KmsClient[] = [];
      const dataDirs: string[] = [];
      let subject: Subject | null = null;
      try {
        subject = await startOne(name, launchFor(round, tag), dataDirs, clients);
        const s = subject;
        const prepare = (scenario: Scenario): Promise<Body> =>
          scenario.prepare({ subject: s, bodiesDir, bodyName: `${scenario.id}-${name}`, plaintexts, aad });
        const bodies = new Map<string, Body>();
        for (const scenario of mine) bodies.set(scenario.id, await prepare(scenario));
        for (const scenario of mine) {
          if (settings.idleS > 0) await new Promise((r) => setTimeout(r, settings.idleS * 1000));
          // Several short windows rather than one long one: this host's speed changes from one second to the next
          // (two servers measured in alternating 2 s windows read 0.77x to 1.50x of each other, README), and the
          // median of many windows is not pulled by a slow stretch as one window's mean is.
          const rates: string[] = [];
          let foreign = 0;
          for (let w = 0; w < settings.windows; w++) {
            const m = await measure(h2load, s, scenario, bodies.get(scenario.id)!, w === 0 ? settings.warmupS : 0);
            rates.push(m.result.reqPerS.toFixed(0));
            foreign = Math.max(foreign, m.foreignPercent ?? 0);
            const k = `${scenario.id}/${name}`;
            measured.set(k, [...(measured.get(k) ?? []), m]);
          }
          const noise = settings.pinned ? `  others on CPU 0 at most ${foreign.toFixed(0)}%${foreign > NOISY_PERCENT ? " (noisy)" : ""}` : "";
          log(`  ${name.padEnd(10)} ${scenario.id.padEnd(20)} ${rates.join(" ").padStart(7)} req/s${noise}`);
        }
        // Still answering correctly after the load?
        for (const scenario of mine) await prepare(scenario);
        peaks.set(name, Math.max(peaks.get(name) ?? 0, peakRssBytes(s.server.child.pid) ?? 0));
        // A profile is written when its process exits normally: SIGTERM lets the server shut down cleanly.
        if (flags["cpu-prof"]) await s.server.child.kill(10_000);
      } finally {
        for (const c of clients) c.close();
        await killAll();
        if (subject !== null) writeFileSync(join(logsDir, `${name}${tag}.log`), subject.server.child.output());
        for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
      }
    }
  }

  const rows = rowsOf(measured);
  const checks = targetChecks(rows);
  const peakRss = names.map((name) => ({ server: name, peakRssBytes: peaks.get(name) ?? null }));
  // A candidate is measured for comparison; only cloudplane's targets decide.
  const pass = checks.every((c) => c.server === "candidate" || c.pass);
  log("");
  // cloudplane is a reference too where a target is measured against it (the rate-limits row).
  log(resultsTable(rows, [...REFERENCES, "cloudplane"]));
  log("");
  log(memoryTable(peakRss));
  log("");
  const noisy = rows.filter((r) => r.foreignCpuPercent !== null && r.foreignCpuPercent > NOISY_PERCENT);
  if (noisy.length > 0) {
    log(`warning: other processes took more than ${NOISY_PERCENT}% of the servers' CPU during ${noisy.map((r) => `${r.server} ${r.scenario}`).join(", ")}; repeat on a quiet machine`);
  }
  log("targets (req/s, medians of every window of every round):");
  for (const line of targetLines(rows, checks)) log(line);
  log(`targets: ${pass ? "PASS" : "FAIL"}`);
  if (flags["cpu-prof"]) {
    const files = readdirSync(profileDir).filter((f) => f.endsWith(".cpuprofile")).sort();
    log("");
    log("where each profiled server's busy CPU went (self time by area of the code; bench/README.md):");
    const profiles = files.map((f) => ({ name: f.replace(/\.cpuprofile$/, ""), ...profileShares(join(profileDir, f)) }));
    log(profileTable(profiles));
    const costs = costLinesByProfile(rows, new Map(profiles.map((p) => [p.name, p.busyPerCipher])));
    if (costs.length > 0) {
      log("the same costs by CPU per call (busy/cipher of the profiles, median of the rounds; bench/README.md):");
      for (const line of costs) log(line);
    }
    log(`CPU profiles in ${profileDir}/<server>-round<n>.cpuprofile (Chrome DevTools or speedscope)`);
  }

  const report = {
    date: new Date().toISOString(),
    git: { commit, srcDirty },
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model ?? "", memoryBytes: os.totalmem(), node: process.version, h2load: h2loadVersion },
    settings: { ...settings, candidate, scenarios: scenarios.map((s) => s.id) },
    targets: scenarios.map((s) => ({ scenario: s.id, targets: s.targets })),
    pass,
    checks,
    results: rows,
    peakRss,
  };
  writeFileSync(join(benchDir, "last.json"), `${JSON.stringify(report, null, 2)}\n`);
  log("results written to .bench/last.json, server output to .bench/logs/");
  return pass ? 0 : 1;
}

// Children never outlive the bench: killed on every way out.
process.on("exit", killAllSync);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    killAllSync();
    process.exit(130);
  });
}
// Generous: every run with its h2load slack, two minutes a round for starting servers, five for the build.
const runsPerRound = scenarios.reduce((n, s) => n + serversOf(s).length, 0);
const ownProcesses = scenarios.filter((s) => s.ownProcess === true).reduce((n, s) => n + serversOf(s).length, 0);
const HARD_LIMIT_MS = (settings.rounds * (runsPerRound * (settings.windows * (settings.durationS + 30) + settings.warmupS) + 120 + ownProcesses * 30) + 300) * 1000;
const limit = setTimeout(() => {
  process.stderr.write(`bench: over ${Math.round(HARD_LIMIT_MS / 1000)} s, giving up\n`);
  killAllSync();
  process.exit(1);
}, HARD_LIMIT_MS);
limit.unref();

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    killAllSync();
    process.exit(1);
  },
);
