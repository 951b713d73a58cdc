import { readFileSync } from "node:fs";
import fc from "fast-check";
import { allProperties } from "../property/properties.js";
import type { PropertySpec, Target } from "../property/properties.js";
import { PROPERTY_SERVER_ENV, PROPERTY_WORKSPACE } from "../property/harness.js";
import { H2Client } from "../property/wire.js";
import { adminJson } from "../support/principals.js";
import { spawnServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";

// `npm run fuzz -- --properties [--runs 1000000]`: the properties of test/property/ (the same arbitraries and
// verdicts) for a long run against a real server in its own process, by default one per call path with half the
// runs each. Prints progress every 10 s, every failure with fast-check's report (seed, path, shrunk
// counterexample), and the server's RSS at the start and the end. Fails on any failed property, a server that
// died or stopped answering /healthz, an error in its log, or RSS over the bound or still growing at the end.

export interface PropertyRunOptions {
  runs: number;
  seed: number;
  concurrency: number;
  // Comma-separated property names (rest, grpc, grpc-messages, grpc-web, connect); empty: all.
  only: string;
  // A server already running (and its pid, for RSS), instead of spawned ones, and its admin's token. The
  // properties send bad credentials on purpose: start it with AUTH_FAILURES_PER_MINUTE=1000000 (PROPERTY_SERVER_ENV),
  // or the admin's calls are soon refused as AUTHENTICATION_RATE_LIMITED.
  url: string;
  token: string;
  // An API key of the admin and its workspace, for the configuration calls (with --url; made for spawned servers).
  apiKey: string;
  workspaceId: string;
  pid: number;
  callPath: string;
  maxRssMiB: number;
}

// Runs per fast-check call, at most: each call has a seed of its own (the run's seed plus the chunk's number),
// which its failure report names; properties take turns by chunk.
const MAX_CHUNK = 2_000;
const CALL_TIMEOUT_MS = 15_000;

interface Server {
  url: string;
  // The admin's token, API key and its workspace, which the properties send where their plans say
  // ADMIN_AUTHORIZATION.
  token: string;
  apiKey: string;
  workspaceId: string;
  pid: number;
  running(): boolean;
  logs(): string;
  kill(): Promise<unknown>;
}

function rssKb(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

async function healthy(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2_000) });
    await res.arrayBuffer();
    return res.status === 200;
  } catch {
    return false;
  }
}

async function knownIds(url: string, token: string): Promise<string[]> {
  const res = await fetch(`${url}/v1/keys`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: JSON.stringify({ parentId: "prop" }) });
  return res.status === 200 ? [((await res.json()) as { id: string }).id] : [];
}

interface PathResult {
  callPath: string;
  runs: number;
  seconds: number;
  alive: boolean;
  healthy: boolean;
  failures: string[];
  errorLogs: string[];
  rssMiB: { start: number; end: number; peak: number; middlePeak: number; lastPeak: number; growing: boolean; overBound: boolean };
}

async function runAgainst(server: Server, callPath: string, runs: number, opts: PropertyRunOptions, specs: PropertySpec<unknown>[]): Promise<PathResult> {
  const known = await knownIds(server.url, server.token);
  const started = Date.now();
  const rss: number[] = [];
  const sample = (): void => {
    if (server.pid > 0) rss.push(rssKb(server.pid));
  };
  sample();
  const rssStart = rss[0] ?? 0;
  const sampler = setInterval(sample, 5_000);
  const CHUNK = Math.max(1, Math.min(MAX_CHUNK, Math.ceil(runs / (specs.length * 4))));
  let done = 0;
  let nextChunk = 0;
  let stop = false;
  let stillHealthy = true;
  const failures: string[] = [];
  const progress = setInterval(() => {
    const s = (Date.now() - started) / 1000;
    process.stdout.write(
      `[${Math.round(s)} s] ${callPath}: ${done}/${runs} inputs (${Math.round(done / s)}/s), ${failures.length} failures, server RSS ${Math.round((rss.at(-1) ?? 0) / 1024)} MiB\n`,
    );
  }, 10_000);

  const worker = async (): Promise<void> => {
    const target: Target = { url: server.url, h2: new H2Client(server.url, CALL_TIMEOUT_MS), timeoutMs: CALL_TIMEOUT_MS, authorization: `Bearer ${server.token}`, apiKey: server.apiKey, workspaceId: server.workspaceId };
    try {
      while (!stop && done < runs && server.running()) {
        const chunk = nextChunk++;
        const spec = specs[chunk % specs.length]!;
        const numRuns = Math.min(CHUNK, runs - chunk * CHUNK);
        if (numRuns <= 0) break;
        const seed = opts.seed + chunk;
        const details = await fc.check(
          fc.asyncProperty(spec.arbitrary(known), async (input) => {
            done++;
            const outcome = await spec.run(target, input);
            if (outcome.failure !== null) throw new Error(`${outcome.failure}\n  sent: ${outcome.sent}\n  answer: ${outcome.answer}`);
          }),
          { numRuns, seed },
        );
        if (details.failed) {
          const error = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
          const report = `${spec.name} (${callPath}, chunk ${chunk}, seed ${seed}): ${fc.defaultReportMessage(details) ?? "failed"}\nGot: ${error}`;
          failures.push(report.length > 6_000 ? `${report.slice(0, 6_000)}...` : report);
          process.stdout.write(`FAILURE ${report.slice(0, 2_000)}\n`);
          if (failures.length >= 20) stop = true;
        }
        if (!(await healthy(server.url))) {
          stillHealthy = false;
          stop = true;
        }
      }
    } finally {
      target.h2.close();
    }
  };
  try {
    await Promise.all(Array.from({ length: opts.concurrency }, worker));
  } finally {
    clearInterval(progress);
    clearInterval(sampler);
  }
  sample();
  const errorLogs = server
    .logs()
    .split("\n")
    .filter((line) => /"level":(50|60)/.test(line))
    .slice(0, 10)
    .map((line) => line.slice(0, 1_000));
  // Growth: the highest RSS of the last third of the run against that of the middle third (as the fuzzer does).
  const third = Math.floor(rss.length / 3);
  const peakOf = (xs: number[]): number => Math.max(0, ...xs);
  const middlePeak = peakOf(rss.slice(third, 2 * third));
  const lastPeak = peakOf(rss.slice(2 * third));
  const peak = peakOf(rss);
  const mib = (kb: number): number => Math.round(kb / 1024);
  return {
    callPath,
    runs: done,
    seconds: Math.round((Date.now() - started) / 1000),
    alive: server.running(),
    healthy: stillHealthy && (await healthy(server.url)),
    failures,
    errorLogs,
    rssMiB: {
      start: mib(rssStart),
      end: mib(rss.at(-1) ?? 0),
      peak: mib(peak),
      middlePeak: mib(middlePeak),
      lastPeak: mib(lastPeak),
      growing: third > 0 && lastPeak > middlePeak * 1.25 + 32 * 1024,
      overBound: peak > opts.maxRssMiB * 1024,
    },
  };
}

export async function runProperties(opts: PropertyRunOptions): Promise<boolean> {
  const names = opts.only === "" ? [] : opts.only.split(",");
  const specs = allProperties.filter((p) => names.length === 0 || names.includes(p.name));
  if (specs.length === 0) throw new Error(`no property named ${opts.only}; there are ${allProperties.map((p) => p.name).join(", ")}`);
  const results: PathResult[] = [];
  if (opts.url !== "") {
    if (opts.token === "") throw new Error("--properties with --url needs --token, the admin's token of that server");
    const server: Server = { url: opts.url, token: opts.token, apiKey: opts.apiKey, workspaceId: opts.workspaceId, pid: opts.pid, running: () => true, logs: () => "", kill: async () => null };
    results.push(await runAgainst(server, "as configured", opts.runs, opts, specs));
  } else {
    const paths = opts.callPath === "both" ? ["direct", "connect"] : [opts.callPath];
    for (const [i, callPath] of paths.entries()) {
      const dir = tempDir("cloudplane-properties-");
      const spawned = await spawnServer({ dataDir: dir.path, env: { ...PROPERTY_SERVER_ENV, CALL_PATH: callPath } });
      try {
        const [made] = await adminJson<{ api_key: string }>(dir.path, ["api-keys", "create", "admin", "--workspace", PROPERTY_WORKSPACE]);
        const server: Server = { ...spawned, apiKey: made!.api_key, workspaceId: PROPERTY_WORKSPACE };
        const share = Math.floor(opts.runs / paths.length) + (i === 0 ? opts.runs % paths.length : 0);
        results.push(await runAgainst(server, callPath, share, { ...opts, seed: opts.seed + i * 1_000_000 }, specs));
      } finally {
        await spawned.kill("SIGKILL");
        dir.remove();
      }
    }
  }
  const ok = results.every((r) => r.alive && r.healthy && r.failures.length === 0 && r.errorLogs.length === 0 && !r.rssMiB.growing && !r.rssMiB.overBound);
  process.stdout.write(`${JSON.stringify({ seed: opts.seed, properties: specs.map((s) => s.name), maxRssMiB: opts.maxRssMiB, results }, null, 2)}\n`);
  process.stdout.write(ok ? "fuzz --properties: PASS\n" : "fuzz --properties: FAIL\n");
  return ok;
}
