import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// cloudplane-admin writes its answer with writeSync to stdout, which may be a non-blocking pipe: a reader slower than
// the command (`| less`, a test's parent process) must get every line, not an EAGAIN failure halfway.

let server: TestServer;

beforeAll(async () => {
  server = await startServer();
  // About 160 bytes a line with --json: far more than a pipe holds (64 KiB on Linux).
  for (let i = 0; i < 1000; i++) await server.app.identity.createServiceAccount(`app-${i}`);
});

afterAll(async () => {
  await server?.stop();
});

describe("cloudplane-admin output to a slow reader", () => {
  it("writes every line and exits 0 when the pipe is full for a while", async () => {
    const child = spawn(process.execPath, ["--import", "tsx", "src/operator/cloudplane-admin.ts", "--data-dir", server.dataDir, "--json", "accounts", "list"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    // "close": the process has exited and its pipes are read to the end.
    const closed = new Promise<number | null>((resolve) => child.on("close", resolve));
    // Read nothing for two seconds (the command fills the pipe meanwhile), then everything.
    child.stdout.pause();
    await new Promise((resolve) => setTimeout(resolve, 2000));
    let stdout = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stdout.resume();
    const code = await closed;
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const names = stdout.split("\n").filter((l) => l !== "").map((l) => (JSON.parse(l) as { name: string }).name);
    expect(names).toHaveLength(1001);
  });

  it("ends quietly, exit 0, when the reader closes the pipe after a line (| head -1)", async () => {
    const child = spawn(process.execPath, ["--import", "tsx", "src/operator/cloudplane-admin.ts", "--data-dir", server.dataDir, "--json", "accounts", "list"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    // As head -1 does: the first line, then the pipe closed.
    await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
    child.stdout.destroy();
    expect(await exited).toBe(0);
    expect(stderr).toBe("");
  });
});
