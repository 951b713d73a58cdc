import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";

// Every process the bench starts, so that all of them are killed at the end, on error and on Ctrl-C alike.
const running = new Set<ChildProcess>();

export interface Child {
  readonly name: string;
  readonly pid: number;
  output(): string;
  // Resolves with the first stdout line that `match` accepts, parsed by it; rejects on exit or timeout.
  waitForLine<T>(match: (line: string) => T | undefined, timeoutMs: number): Promise<T>;
  readonly exited: Promise<number | null>;
  // SIGTERM, then SIGKILL if it has not exited after graceMs (0: SIGKILL at once).
  kill(graceMs?: number): Promise<void>;
}

export function startChild(name: string, command: string, args: string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Child {
  const proc = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ["ignore", "pipe", "pipe"] });
  if (proc.pid === undefined) throw new Error(`${name}: could not start ${command}`);
  running.add(proc);
  let output = "";
  const exited = new Promise<number | null>((resolve) => {
    proc.once("exit", (code) => {
      running.delete(proc);
      resolve(code);
    });
    proc.once("error", () => {
      running.delete(proc);
      resolve(null);
    });
  });
  proc.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  proc.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  // Long runs must not keep every byte h2load or a server ever printed; the tail is what explains a failure.
  const trim = setInterval(() => {
    if (output.length > 1 << 20) output = output.slice(-(1 << 19));
  }, 1000).unref();
  void exited.then(() => clearInterval(trim));

  return {
    name,
    pid: proc.pid,
    output: () => output,
    exited,
    waitForLine<T>(match: (line: string) => T | undefined, timeoutMs: number): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        let buffered = "";
        const done = (): void => {
          clearTimeout(timer);
          proc.stdout?.off("data", onData);
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`${name}: no expected line within ${timeoutMs} ms:\n${output}`));
        }, timeoutMs);
        const onData = (chunk: Buffer): void => {
          buffered += chunk.toString();
          const lines = buffered.split("\n");
          buffered = lines.pop() ?? "";
          for (const line of lines) {
            const value = match(line);
            if (value !== undefined) {
              done();
              resolve(value);
              return;
            }
          }
        };
        proc.stdout?.on("data", onData);
        void exited.then((code) => {
          done();
          reject(new Error(`${name}: exited with ${code} before it was ready:\n${output}`));
        });
      });
    },
    async kill(graceMs = 0) {
      const alive = (): boolean => proc.exitCode === null && proc.signalCode === null;
      if (alive() && graceMs > 0) {
        proc.kill("SIGTERM");
        const timer = setTimeout(() => alive() && proc.kill("SIGKILL"), graceMs);
        await exited;
        clearTimeout(timer);
        return;
      }
      if (alive()) proc.kill("SIGKILL");
      await exited;
    },
  };
}

// Runs a command to completion with a time limit; resolves with its exit code and output.
export async function runToEnd(name: string, command: string, args: string[], timeoutMs: number, options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<{ code: number | null; output: string }> {
  const child = startChild(name, command, args, options);
  const timer = setTimeout(() => void child.kill(), timeoutMs);
  const code = await child.exited;
  clearTimeout(timer);
  return { code, output: child.output() };
}

export function killAllSync(): void {
  for (const proc of running) {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
  }
}

export async function killAll(): Promise<void> {
  const waits = [...running].map((proc) => new Promise<void>((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
    proc.once("exit", () => resolve());
    proc.kill("SIGKILL");
  }));
  await Promise.all(waits);
}
