import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createKmsClient } from "./kms-clients.js";
import type { Protocol } from "./kms-clients.js";

// Real processes for the master key tests: the server as an operator starts it (and as it refuses to start), the
// re-wrap command, and a workload of ciphertexts to decrypt afterwards. Every process gets MASTER_KEY and
// MASTER_KEY_FILE explicitly, so nothing of the test runner's environment decides which key is used.

const baseEnv: Record<string, string> = {
  PORT: "0",
  HOST: "127.0.0.1",
  LOG_LEVEL: "info",
  SHUTDOWN_TIMEOUT_SECONDS: "2",
  PROVIDER_DELAY_MS: "0",
  MASTER_KEY: "",
  MASTER_KEY_FILE: "",
};

export interface Exited {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function collect(child: ChildProcess): { out: () => string; err: () => string; exited: Promise<Exited> } {
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<Exited>((resolve) => child.once("close", (code, signal) => resolve({ code, signal, stdout, stderr })));
  return { out: () => stdout, err: () => stderr, exited };
}

function spawnTs(entry: string, args: string[], env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ["--import", "tsx", entry, ...args], {
    env: { ...process.env, ...baseEnv, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

// Starts the server and expects it to refuse: resolves with its exit code and output. A server that starts
// listening instead is killed and fails the test.
export async function startExpectingRefusal(dataDir: string, env: Record<string, string> = {}): Promise<Exited> {
  const child = spawnTs("src/main.ts", [], { DATA_DIR: dataDir, ...env });
  const io = collect(child);
  const listening = new Promise<"listening">((resolve) => {
    child.stdout!.on("data", () => {
      if (io.out().includes("cloudplane listening")) resolve("listening");
    });
  });
  const first = await Promise.race([io.exited, listening]);
  if (first === "listening") {
    child.kill("SIGKILL");
    await io.exited;
    throw new Error(`the server started, a refusal was expected:\n${io.out()}`);
  }
  return first;
}

// Runs `npm run rewrap-master-key` (its source, as the tests run the server from source) to its end.
export function runRewrap(dataDir: string, newKeyFile: string, env: Record<string, string> = {}): Promise<Exited> {
  return collect(spawnTs("src/operator/rewrap-master-key.ts", ["--data-dir", dataDir, "--new-master-key-file", newKeyFile], env)).exited;
}

// Starts a re-wrap that stops for good after `step` (the command's test-only CLOUDPLANE_TEST_REWRAP_PAUSE_AT) and
// resolves once it is there, holding the data directory; `kill` ends it with SIGKILL and resolves with what it printed.
export async function rewrapPausedAt(dataDir: string, newKeyFile: string, step: string, env: Record<string, string> = {}): Promise<{ kill(): Promise<Exited> }> {
  const child = spawnTs("src/operator/rewrap-master-key.ts", ["--data-dir", dataDir, "--new-master-key-file", newKeyFile], {
    ...env,
    CLOUDPLANE_TEST_REWRAP_PAUSE_AT: step,
  });
  const io = collect(child);
  await new Promise<void>((resolve, reject) => {
    child.stderr!.on("data", () => {
      if (io.err().includes(`paused at ${step}`)) resolve();
    });
    void io.exited.then((e) => reject(new Error(`the re-wrap ended (${e.code}) before ${step}:\n${e.stdout}${e.stderr}`)));
  });
  return {
    async kill() {
      child.kill("SIGKILL");
      const exited = await io.exited;
      if (exited.signal !== "SIGKILL") throw new Error(`the re-wrap was not killed: ${JSON.stringify(exited)}`);
      return exited;
    },
  };
}

// A re-wrap killed with SIGKILL right after `step`. Resolves with what it printed.
export async function rewrapKilledAt(dataDir: string, newKeyFile: string, step: string, env: Record<string, string> = {}): Promise<Exited> {
  return (await rewrapPausedAt(dataDir, newKeyFile, step, env)).kill();
}

export const ownKeyFile = (dataDir: string): string => join(dataDir, "master.key");
export const stagedKeyFile = (dataDir: string): string => join(dataDir, "master.key.new");
// The data directory's own key files as they are: [master.key, master.key.new], null for a missing one.
export const ownKeyFiles = (dataDir: string): [string | null, string | null] =>
  [ownKeyFile(dataDir), stagedKeyFile(dataDir)].map((f) => (existsSync(f) ? readFileSync(f, "utf8") : null)) as [string | null, string | null];

export interface Sealed {
  keyId: string;
  keyVersionId: number;
  ciphertext: Uint8Array;
  aad: Uint8Array;
  plaintext: string;
}

// Keys of every algorithm with three versions each, one version scheduled for destruction (its material is still
// stored, and re-wrapped like the rest), and a ciphertext under every ENABLED version.
export async function sealSome(url: string, keys: number, protocol: Protocol = "grpc"): Promise<Sealed[]> {
  const kms = createKmsClient(protocol, url);
  const sealed: Sealed[] = [];
  try {
    for (let k = 0; k < keys; k++) {
      const keyId = (await kms.createKey({ parentId: "mk", defaultAlgorithm: (["AES_128", "AES_192", "AES_256"] as const)[k % 3] })).id!;
      await kms.createVersion(keyId, "AES_256");
      await kms.createVersion(keyId);
      if (k === 0) await kms.destroyVersion(keyId, 3);
      for (const keyVersionId of k === 0 ? [1, 2] : [1, 2, 3]) {
        const plaintext = `secret ${k}/${keyVersionId}`;
        const aad = Buffer.from(`aad ${k}`);
        const res = await kms.encrypt({ keyId, keyVersionId, plaintext: Buffer.from(plaintext), aad });
        sealed.push({ keyId, keyVersionId, ciphertext: res.ciphertext, aad, plaintext });
      }
    }
  } finally {
    await kms.close();
  }
  return sealed;
}

// Decrypts every ciphertext over gRPC and over REST; resolves with the plaintexts, in order, twice.
export async function openAll(url: string, sealed: Sealed[]): Promise<string[]> {
  const opened: string[] = [];
  for (const protocol of ["grpc", "rest"] as const) {
    const kms = createKmsClient(protocol, url);
    try {
      for (const s of sealed) {
        const res = await kms.decrypt({ keyId: s.keyId, ciphertext: s.ciphertext, aad: s.aad });
        opened.push(Buffer.from(res.plaintext).toString());
      }
    } finally {
      await kms.close();
    }
  }
  return opened;
}
