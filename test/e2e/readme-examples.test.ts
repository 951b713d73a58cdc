import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnServer } from "../support/server.js";
import type { SpawnedServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";

// Runs every example of README.md as a reader would: in order, in one shell, from the repository's root, against
// a server started as `npm start` starts it, then all of them once more on the same data. Each fenced block of
// the README carries a marker comment on the line before it:
//   <!-- example -->        a shell block that is run; the block after it must be its output
//   <!-- output -->         what the example before it prints, where "..." stands for any text
//   <!-- file: PATH -->     the content of a file of the repository, shown as it is
//   <!-- not-run: REASON --> not run here, for the reason given

const root = fileURLToPath(new URL("../..", import.meta.url));
const readme = readFileSync(path.join(root, "README.md"), "utf8");

interface Block {
  marker: string;
  lang: string;
  body: string;
  line: number;
}

function fencedBlocks(markdown: string): Block[] {
  const lines = markdown.split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i] ?? "");
    if (open === null) continue;
    const end = lines.findIndex((line, j) => j > i && line.trimEnd() === "```");
    if (end === -1) throw new Error(`README.md:${i + 1}: fenced block never closed`);
    let before = i - 1;
    while (before >= 0 && lines[before]?.trim() === "") before--;
    const marker = /^<!--\s*(.*?)\s*-->$/.exec(lines[before]?.trim() ?? "")?.[1] ?? "";
    blocks.push({ marker, lang: open[1] ?? "", body: lines.slice(i + 1, end).join("\n"), line: i + 1 });
    i = end;
  }
  return blocks;
}

interface Example {
  line: number;
  script: string;
  expected: string;
}

const blocks = fencedBlocks(readme);
const examples: Example[] = blocks.flatMap((block, i) => {
  if (block.marker !== "example") return [];
  const output = blocks[i + 1];
  if (output?.marker !== "output") throw new Error(`README.md:${block.line}: an example must be followed by its output`);
  return [{ line: block.line, script: block.body, expected: output.body }];
});

/** The output pattern as a regular expression: "..." matches any text, the rest matches itself. */
function outputPattern(expected: string): RegExp {
  const parts = normalize(expected)
    .split("...")
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${parts.join("[\\s\\S]*?")}$`);
}

function normalize(text: string): string {
  return text
    .replace(/\r/g, "")
    .split("\n")
    .map((line) => line.trimEnd())
    .join("\n")
    .trim();
}

interface ShellRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

const separator = (i: number): string => `@@readme example ${i}@@`;

// One shell for all the examples, as a reader pasting them one after the other: variables set by one example
// are there for the next. `set -e` stops at the first command that fails, so a failure anywhere is seen. What
// differs from the reader's `npm start` is put in place: the port, and the data directory (`./data/`), where the
// first start wrote the admin's credentials that the examples exchange for a token.
function runExamples(port: number, dataDir: string): Promise<ShellRun> {
  const script = [
    "set -e",
    ...examples.flatMap((example, i) => [
      `printf '\\n%s\\n' '${separator(i)}'`,
      example.script.replaceAll("localhost:8080", `localhost:${port}`).replaceAll("./data/", `${dataDir}/`),
    ]),
    `printf '\\n%s\\n' '${separator(examples.length)}'`,
  ].join("\n");
  const dir = tempDir();
  const file = path.join(dir.path, "readme-examples.sh");
  writeFileSync(file, script);
  // sh, not bash: the README says sh, and on Debian that is dash, which has no bash extensions.
  const child = spawn("sh", [file], {
    cwd: root,
    env: { ...process.env, CLOUDPLANE_ADDRESS: `localhost:${port}` },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => {
      dir.remove();
      resolve({ code, stdout, stderr });
    });
  });
}

function checkRun(run: ShellRun): void {
  for (const [i, example] of examples.entries()) {
    const start = run.stdout.indexOf(separator(i));
    const end = run.stdout.indexOf(separator(i + 1));
    const context = `README.md:${example.line}\n--- stderr ---\n${run.stderr}`;
    expect(start, `example at ${context}`).toBeGreaterThanOrEqual(0);
    expect(end, `example at ${context}\nexited ${run.code} before its end`).toBeGreaterThan(start);
    const output = normalize(run.stdout.slice(start + separator(i).length, end));
    expect(output, `output of the example at ${context}`).toMatch(outputPattern(example.expected));
  }
  expect(run.code, run.stderr).toBe(0);
}

describe("README.md", () => {
  it("marks every fenced block, and each example has an output", () => {
    const known = /^(example|output|file: \S+|not-run: .+)$/;
    for (const block of blocks) {
      expect(block.marker, `fenced block at README.md:${block.line}`).toMatch(known);
    }
    expect(examples.length).toBeGreaterThanOrEqual(6);
  });

  it("shows each example file exactly as it is in the repository", () => {
    const files = blocks.filter((block) => block.marker.startsWith("file: "));
    expect(files.length).toBeGreaterThan(0);
    for (const block of files) {
      const file = path.join(root, block.marker.slice("file: ".length));
      expect(existsSync(file), `README.md:${block.line} names ${file}`).toBe(true);
      expect(block.body, `README.md:${block.line}`).toBe(readFileSync(file, "utf8").replace(/\n$/, ""));
    }
  });

  it("reads '...' in an output as any text", () => {
    expect("created key abc named payments-x1").toMatch(outputPattern("created key ... named payments-..."));
    expect("created key abc named orders-x1").not.toMatch(outputPattern("created key ... named payments-..."));
    expect('{"a":1,\n"b":2}').toMatch(outputPattern('{"a":1,...}'));
  });

  describe("examples against a server started as npm start starts it", () => {
    let server: SpawnedServer;
    let data: ReturnType<typeof tempDir>;
    beforeAll(async () => {
      data = tempDir();
      server = await spawnServer({ dataDir: data.path });
    });
    afterAll(async () => {
      await server?.kill("SIGTERM");
      data?.remove();
    });

    it("run in order and print what the README shows", { timeout: 120_000 }, async () => {
      checkRun(await runExamples(server.port, data.path));
    });

    it("run again on the same data and print the same", { timeout: 120_000 }, async () => {
      checkRun(await runExamples(server.port, data.path));
    });
  });
});
