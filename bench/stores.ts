import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { compile } from "./lib/build.js";
import { killAll, killAllSync } from "./lib/children.js";
import { startCloudplane } from "./lib/servers.js";
import type { LaunchOptions, RunningServer } from "./lib/servers.js";

// `npm run bench` part two (also `npm run bench:stores`): the calls that touch storage, on the embedded SQLite store
// and on PostgreSQL side by side (GetCryptoKey, CreateCryptoKeyVersion, CreateNodePool), and Encrypt against one and
// two servers sharing one PostgreSQL database. REST over HTTP/1.1 keep-alive from a closed loop of concurrent callers
// in this process; every answer is checked. Writes .bench/stores.json. PostgreSQL rows are left out, and the report
// says so, when CLOUDPLANE_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) cannot be reached.
// See bench/README.md, "Storage".

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

const { values: flags } = parseArgs({
  options: {
    duration: { type: "string", default: "3" },
    concurrency: { type: "string", default: "16" },
    help: { type: "boolean", default: false },
  },
  strict: true,
});
if (flags.help) {
  process.stdout.write("Usage: npm run bench:stores -- [--duration S (default 3)] [--concurrency N callers (default 16)]\n");
  process.exit(0);
}
const durationMs = Number(flags.duration) * 1000;
const concurrency = Number(flags.concurrency);
if (!(durationMs > 0) || !Number.isInteger(concurrency) || concurrency < 1) throw new Error("--duration and --concurrency must be positive");

const adminUrl = process.env.CLOUDPLANE_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const MASTER_KEY = randomBytes(32).toString("base64");
const VDC = "bench-vdc";
const CLUSTER = "bench-cluster";
const catalog = {
  computeFlavors: [{ id: "bench.small", cpu: 2, memoryGiB: 8, diskGiB: 50 }],
  serviceInstances: [{ id: VDC, name: "bench", clusters: [{ id: CLUSTER, name: "bench", capacity: 10_000_000, maxPoolSize: 8 }] }],
};

interface Result {
  row: string;
  store: string;
  servers: number;
  calls: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
}

async function postgresReachable(): Promise<boolean> {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

async function onAdmin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

// A cluster of `count` servers on one store: a new PostgreSQL database, or one server's own SQLite data directory.
async function startServers(launch: LaunchOptions, store: "sqlite" | "postgres", count: number, catalogFile: string) {
  const dataDir = mkdtempSync(join(os.tmpdir(), "cloudplane-bench-stores-"));
  const database = store === "postgres" ? `cloudplane_bench_${randomBytes(5).toString("hex")}` : null;
  if (database !== null) await onAdmin(`CREATE DATABASE ${database}`);
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  const env = {
    MASTER_KEY,
    CATALOG_FILE: catalogFile,
    PROVIDER_DELAY_MS: "0",
    ...(database === null ? {} : { DATABASE_URL: url.toString() }),
  };
  const servers: RunningServer[] = [];
  // The first bootstraps the admin account; the others find it.
  servers.push(await startCloudplane(launch, "cloudplane", "src/main.js", dataDir, [], env));
  for (let i = 1; i < count; i++) servers.push(await startCloudplane(launch, "cloudplane", "src/main.js", dataDir, [], env));
  const credentials = readFileSync(join(dataDir, "admin-credentials.json"), "utf8");
  const base = (i: number) => `http://127.0.0.1:${servers[i % servers.length]!.port}`;
  const tokenReply = await fetch(`${base(0)}/public/v2/service_auth`, { method: "POST", headers: { "content-type": "application/json" }, body: credentials });
  const token = ((await tokenReply.json()) as { token: { access_token: string } }).token.access_token;
  return {
    base,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    async stop() {
      for (const s of servers) await s.child.kill(5000);
      if (database !== null) await onAdmin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

type Cluster = Awaited<ReturnType<typeof startServers>>;

async function call(cluster: Cluster, caller: number, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${cluster.base(caller)}${path}`, { method, headers: cluster.headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status !== 200) throw new Error(`${method} ${path} answered ${res.status}: ${JSON.stringify(json).slice(0, 300)}`);
  return json;
}

// `concurrency` callers, caller i on server i mod the number of servers, each calling `once` in a loop for the
// duration.
async function load(row: string, store: string, servers: number, once: (caller: number, n: number) => Promise<void>): Promise<Result> {
  const latencies: number[] = [];
  const end = performance.now() + durationMs;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, caller) => {
      for (let n = 0; performance.now() < end; n++) {
        const t = performance.now();
        await once(caller, n);
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return { row, store, servers, calls: latencies.length, perSecond: latencies.length / seconds, p50Ms: at(0.5), p99Ms: at(0.99) };
}

async function storeRows(launch: LaunchOptions, store: "sqlite" | "postgres", catalogFile: string): Promise<Result[]> {
  const cluster = await startServers(launch, store, 1, catalogFile);
  try {
    const keys: string[] = [];
    for (let i = 0; i < concurrency; i++) keys.push(String((await call(cluster, i, "POST", "/v1/keys", { parentId: "bench" })).id));
    const out: Result[] = [];
    out.push(await load("GetCryptoKey", store, 1, (c) => call(cluster, c, "GET", `/v1/keys/${keys[c]}`).then(() => {})));
    // One key per caller: versions of one key are created one after another by design.
    out.push(await load("CreateCryptoKeyVersion", store, 1, (c) => call(cluster, c, "POST", `/v1/keys/${keys[c]}/versions`, {}).then(() => {})));
    let pools = 0;
    out.push(
      await load("CreateNodePool", store, 1, () =>
        call(cluster, 0, "POST", `/cluster/v1/${VDC}/node-pools`, {
          clusterId: CLUSTER,
          nodeConfig: { computeFlavor: "bench.small" },
          nodePoolName: `pool-${pools++}`,
          scalePolicy: { fixedScale: { count: 1 } },
        }).then(() => {}),
      ),
    );
    return out;
  } finally {
    await cluster.stop();
  }
}

async function encryptRow(launch: LaunchOptions, servers: number, catalogFile: string): Promise<Result> {
  const cluster = await startServers(launch, "postgres", servers, catalogFile);
  try {
    const keyId = String((await call(cluster, 0, "POST", "/v1/keys", { parentId: "bench" })).id);
    const body = { keyId, keyVersionId: 1, plaintext: randomBytes(1024).toString("base64") };
    return await load("Encrypt 1 KiB", "postgres", servers, (c) => call(cluster, c, "POST", "/v1/encrypt", body).then(() => {}));
  } finally {
    await cluster.stop();
  }
}

async function main(): Promise<void> {
  const build = await compile(root);
  if (build.typeErrors !== null) process.stdout.write(`note: tsc reported type errors; measuring what it emitted\n`);
  const launch: LaunchOptions = { root, buildDir: build.dir, cpu: null, nodeFlags: [] };
  const work = join(root, ".bench");
  mkdirSync(work, { recursive: true });
  const catalogFile = join(work, "stores-catalog.json");
  writeFileSync(catalogFile, JSON.stringify(catalog));
  const withPostgres = await postgresReachable();
  const results: Result[] = [...(await storeRows(launch, "sqlite", catalogFile))];
  if (withPostgres) {
    results.push(...(await storeRows(launch, "postgres", catalogFile)));
    results.push(await encryptRow(launch, 1, catalogFile));
    results.push(await encryptRow(launch, 2, catalogFile));
  }
  const lines = [
    `storage rows: REST over HTTP/1.1, ${concurrency} concurrent callers, ${durationMs / 1000} s each (functional figures on a shared machine)`,
    `${"row".padEnd(24)} ${"store".padEnd(9)} ${"servers".padStart(7)} ${"calls".padStart(7)} ${"calls/s".padStart(9)} ${"p50 ms".padStart(8)} ${"p99 ms".padStart(8)}`,
    ...results.map(
      (r) =>
        `${r.row.padEnd(24)} ${r.store.padEnd(9)} ${String(r.servers).padStart(7)} ${String(r.calls).padStart(7)} ${r.perSecond.toFixed(0).padStart(9)} ${r.p50Ms.toFixed(2).padStart(8)} ${r.p99Ms.toFixed(2).padStart(8)}`,
    ),
  ];
  if (!withPostgres) lines.push(`SKIPPED the PostgreSQL rows: no PostgreSQL at ${adminUrl} (set CLOUDPLANE_TEST_DATABASE_URL)`);
  process.stdout.write(`${lines.join("\n")}\n`);
  writeFileSync(join(work, "stores.json"), `${JSON.stringify({ concurrency, durationMs, postgres: withPostgres, results }, null, 2)}\n`);
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
