import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { startChild } from "./children.js";
import type { Child } from "./children.js";

// Starts the servers under test, each a child process of its own (pinned to one CPU when asked), and waits until
// each answers.

// The baselines: plain @grpc/grpc-js, a bare node:http2 gRPC handler, a bare node:http REST endpoint.
export type BaselineName = "grpc-js" | "http2" | "http1";

// cloudplane variants: "candidate" is a second cloudplane build (another entry script) or the same one with other
// node flags, measured alongside for A/B comparisons; "no-stages" is src/main.js with the call pipeline's stages
// turned off (PIPELINE_STAGES_OFF), for what those stages cost.
export type CloudplaneName = "cloudplane" | "candidate" | "no-stages" | "no-access" | "no-metrics" | "kms-limited";

export type ServerName = BaselineName | CloudplaneName;

// The hook for the "pipeline stages cost" row: the environment that turns the call pipeline's stages off
// (`pipelineStages` in src/config.ts; the server logs a warning when it is set). A server that did not read it
// would be plain cloudplane, and the cost measured 0 give or take the noise.
export const PIPELINE_STAGES_OFF: Readonly<Record<string, string>> = { PIPELINE_STAGES: "none" };

// The hook for the "access stages cost" row ("no-access"): every stage but authentication and authorization.
export const ACCESS_STAGES_OFF: Readonly<Record<string, string>> = { PIPELINE_STAGES: "no-access" };

// The hook for the "metrics cost" row ("no-metrics"): every stage but the metrics stage, and no /metrics.
export const METRICS_OFF: Readonly<Record<string, string>> = { METRICS: "off" };
// The hook for the "rate limits cost" row ("kms-limited"): cloudplane with the key management service rate-limited
// too (by default only the compute platform's services are), with limits no load reaches, so that every call is
// counted and none refused.
const UNREACHABLE = String(Number.MAX_SAFE_INTEGER);
// Every cloudplane of the bench: the compute platform's services stay limited (they are by default), with limits no
// load reaches, so that the VCD rows count every call and are refused none (the documented 100 GETs a minute would
// refuse all but the first hundred of a run).
const LIMITS_UNREACHED: Readonly<Record<string, string>> = {
  RATE_LIMIT_GET_PER_MINUTE: UNREACHABLE,
  RATE_LIMIT_GET_PER_DAY: UNREACHABLE,
  RATE_LIMIT_POST_PER_MINUTE: UNREACHABLE,
  RATE_LIMIT_POST_PER_DAY: UNREACHABLE,
};
export const KMS_RATE_LIMITED: Readonly<Record<string, string>> = { RATE_LIMIT_SERVICES: "compute.*,kms.v1.KeyManagerService" };

export interface RunningServer {
  name: ServerName;
  port: number;
  child: Child;
}

export interface LaunchOptions {
  root: string;
  buildDir: string;
  // CPU list for taskset, or null.
  cpu: string | null;
  // Extra node flags for every server; `{name}` is replaced by the server's name.
  nodeFlags: string[];
}

function command(o: LaunchOptions, name: ServerName, script: string, extraFlags: string[] = []): [string, string[]] {
  const guard = pathToFileURL(join(o.buildDir, "bench", "lib", "orphan-guard.js")).href;
  const flags = [...o.nodeFlags, ...extraFlags].map((f) => f.replaceAll("{name}", name));
  const args = ["--import", guard, ...flags, join(o.buildDir, script)];
  // taskset execs node, so the child's pid is the server's pid (for /proc readings).
  return o.cpu === null ? [process.execPath, args] : ["taskset", ["-c", o.cpu, process.execPath, ...args]];
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

// Over h2c, as the load will come.
function healthy(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    const done = (ok: boolean): void => {
      session.destroy();
      resolve(ok);
    };
    session.on("error", () => done(false));
    session.setTimeout(1000, () => done(false));
    const req = session.request({ ":path": "/healthz" });
    req.on("response", (headers) => {
      req.resume();
      done(headers[":status"] === 200);
    });
    req.on("error", () => done(false));
    req.end();
  });
}

// The node flags of `npm start`, read from package.json, so the bench measures cloudplane as it is shipped.
export const START_FLAGS = startFlags();

function startFlags(): string[] {
  // This module runs from bench/lib under tsx, and is compiled into .bench/build/bench/lib too.
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    if (dirname(dir) === dir) throw new Error("no package.json above the bench");
    dir = dirname(dir);
  }
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { scripts: { start: string } };
  const found = /\bnode((?: --\S+)*) dist\/src\/main\.js/.exec(pkg.scripts.start);
  if (found === null) throw new Error(`package.json's start script does not run node [flags] dist/src/main.js: ${pkg.scripts.start}`);
  return found[1]!.trim().split(" ").filter((f) => f !== "");
}

// cloudplane as an operator runs it, from the compiled output (`entry`, e.g. src/main.js), with its own empty data
// directory. LOG_LEVEL=warn keeps its "listening" line quiet, so readiness is its /healthz. `extraEnv` adds
// settings (PIPELINE_STAGES_OFF for "no-stages").
export async function startCloudplane(
  o: LaunchOptions,
  name: CloudplaneName,
  entry: string,
  dataDir: string,
  extraFlags: string[] = [],
  extraEnv: Readonly<Record<string, string>> = {},
): Promise<RunningServer> {
  const port = await freePort();
  const [cmd, args] = command(o, name, entry, [...START_FLAGS, ...extraFlags]);
  const child = startChild(name, cmd, args, {
    cwd: o.root,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      DATA_DIR: dataDir,
      MASTER_KEY: randomBytes(32).toString("base64"),
      LOG_LEVEL: "warn",
      // The vApp round trips measure the server, not the simulated platform's build time.
      PROVIDER_DELAY_MS: "0",
      ...LIMITS_UNREACHED,
      ...extraEnv,
    },
  });
  let exited = false;
  void child.exited.then(() => (exited = true));
  const deadline = Date.now() + 30_000;
  while (!(await healthy(port))) {
    if (exited) throw new Error(`${name} exited before it was ready:\n${child.output()}`);
    if (Date.now() > deadline) throw new Error(`${name} not ready after 30 s:\n${child.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { name, port, child };
}

// A baseline prints {"listening":port} once bound.
export async function startBaseline(o: LaunchOptions, name: BaselineName, keyId: string): Promise<RunningServer> {
  const [cmd, args] = command(o, name, `bench/baseline-${name}.js`);
  const child = startChild(name, cmd, args, { cwd: o.root, env: { ...process.env, PORT: "0", BENCH_KEY_ID: keyId } });
  const port = await child.waitForLine((line) => {
    try {
      const parsed = JSON.parse(line) as { listening?: unknown };
      return typeof parsed.listening === "number" ? parsed.listening : undefined;
    } catch {
      return undefined;
    }
  }, 30_000);
  return { name, port, child };
}
