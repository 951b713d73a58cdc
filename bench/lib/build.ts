import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { runToEnd } from "./children.js";

// Compiles src/, gen/ and bench/ with tsc into .bench/build, so that every server runs as plain JavaScript
// under plain `node`, as `npm start` runs cloudplane, with no loader hook in any of them.

export interface Build {
  dir: string;
  typeErrors: string | null;
}

export async function compile(root: string): Promise<Build> {
  const dir = join(root, ".bench", "build");
  rmSync(dir, { recursive: true, force: true });
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  const { code, output } = await runToEnd("tsc", process.execPath, [tsc, "-p", join(root, "bench", "tsconfig.json")], 180_000, { cwd: root });
  const entries = ["src/main.js", "bench/baseline-grpc-js.js", "bench/baseline-http2.js", "bench/baseline-http1.js", "bench/lib/orphan-guard.js"];
  const missing = entries.filter((e) => !existsSync(join(dir, e)));
  if (missing.length > 0) throw new Error(`tsc exited with ${code} and did not emit ${missing.join(", ")}:\n${output.slice(-3000)}`);
  // tsc still emits when another change in progress has a type error; the bench measures what was emitted.
  return { dir, typeErrors: code === 0 ? null : output.slice(-3000) };
}
