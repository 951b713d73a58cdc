import { spawn } from "node:child_process";
import { Writable } from "node:stream";
import { loadConfig } from "../../src/config.js";
import type { Config } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { build } from "../../src/server.js";
import type { App } from "../../src/server.js";
import type { Clock } from "../../src/shared/clock.js";
import type { Stage } from "../../src/pipeline/stage.js";
import { loginAsAdmin } from "./credentials.js";
import { createDatabase } from "./postgres.js";
import type { TestDatabase } from "./postgres.js";
import { tempDir } from "./temp-dir.js";

// Settings every test server shares: a free port on loopback, a fixed master key, and the short minimums the
// contract allows tests to use.
const testEnv: Record<string, string> = {
  PORT: "0",
  HOST: "127.0.0.1",
  MASTER_KEY: Buffer.alloc(32, 7).toString("base64"),
  LOG_LEVEL: "warn",
  SHUTDOWN_TIMEOUT_SECONDS: "2",
  PROVIDER_DELAY_MS: "0",
  // CI runs the cross-protocol scenarios and bad-input tables a second time with CALL_PATH=connect, the
  // reference path the direct adapters must match (package.json "test").
  CALL_PATH: process.env.CLOUDPLANE_TEST_CALL_PATH ?? "direct",
  // Tests move fake clocks by years (rotation, destruction); the admin token of test/support must outlive them.
  // The longest the server allows (expires_in is an int32 of seconds, about 68 years). Tests of expiry set their own.
  ACCESS_TOKEN_TTL_SECONDS: String(2 ** 31 - 1),
  // Ordinary tests make many calls with one token; the rate-limit tests set the documented limits themselves.
  RATE_LIMIT_GET_PER_MINUTE: "1000000",
  RATE_LIMIT_GET_PER_DAY: "1000000",
  RATE_LIMIT_POST_PER_MINUTE: "1000000",
  RATE_LIMIT_POST_PER_DAY: "1000000",
};

export interface TestServer {
  url: string;
  // The bootstrapped admin's token, also sent by default by every helper of test/support (credentials.ts).
  token: string;
  // The admin's principal id: `owner` of the keys and `createdBy` of the tasks the tests make as admin.
  adminId: string;
  port: number;
  dataDir: string;
  // The server's PostgreSQL database, or null on the embedded store (store-rows.ts reads either).
  databaseUrl: string | null;
  app: App;
  config: Config;
  logs(): string;
  stop(): Promise<void>;
}

// Builds the real server in this process on port 0; tests call it over real sockets. With DATABASE_URL set for the
// test run (package.json "test" runs the foundation's scenarios so a second time), each server gets a new, empty
// PostgreSQL database on that server, dropped at stop(); else the embedded store of its data directory.
export async function startServer(
  opts: { env?: Record<string, string>; clock?: Clock; dataDir?: string; stages?: Stage[] } = {},
): Promise<TestServer> {
  const dir = opts.dataDir === undefined ? tempDir() : null;
  const dataDir = opts.dataDir ?? dir!.path;
  const database: TestDatabase | null = process.env.DATABASE_URL !== undefined && opts.env?.DATABASE_URL === undefined ? await createDatabase(process.env.DATABASE_URL) : null;
  const databaseUrl = opts.env?.DATABASE_URL ?? database?.url ?? null;
  const config = loadConfig([], { ...testEnv, DATA_DIR: dataDir, ...(database === null ? {} : { DATABASE_URL: database.url }), ...opts.env });
  if (config === "help") throw new Error("unreachable");
  let output = "";
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      output += chunk.toString();
      callback();
    },
  });
  const app = await build(config, createLogger(config.logLevel, sink), { clock: opts.clock, extraStages: opts.stages });
  const port = await app.listen();
  const url = `${config.tlsCertFile === "" ? "http" : "https"}://127.0.0.1:${port}`;
  return {
    url,
    token: await loginAsAdmin(url, dataDir),
    adminId: (await app.identity.listServiceAccounts()).find((a) => a.name === "admin")!.id,
    port,
    dataDir,
    databaseUrl,
    app,
    config,
    logs: () => output,
    async stop() {
      await app.close();
      await database?.drop();
      dir?.remove();
    },
  };
}

export interface SpawnedServer {
  url: string;
  token: string;
  port: number;
  // The server's process id, to read its memory from /proc or to check that it is still alive.
  pid: number;
  // False once the process has exited, whatever the reason.
  running(): boolean;
  logs(): string;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

// Starts `src/main.ts` as a child process, as an operator would, and waits for its "listening" line.
export async function spawnServer(opts: { dataDir: string; env?: Record<string, string> }): Promise<SpawnedServer> {
  // A DATABASE_URL of the test run names the server to make databases on, not one for this server.
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    env: { ...inherited, ...testEnv, LOG_LEVEL: "info", DATA_DIR: opts.dataDir, ...opts.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 20_000);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      for (const line of output.split("\n")) {
        if (!line.includes("cloudplane listening")) continue;
        clearTimeout(timer);
        resolve((JSON.parse(line) as { port: number }).port);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    void exited.then(() => reject(new Error(`server exited before listening:\n${output}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    token: await loginAsAdmin(url, opts.dataDir),
    port,
    pid: child.pid!,
    running: () => child.exitCode === null && child.signalCode === null,
    logs: () => output,
    async kill(signal = "SIGKILL") {
      child.kill(signal);
      return exited;
    },
  };
}
