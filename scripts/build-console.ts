// Bundles the operator console (console/) with esbuild into dist/console/: index.html and console.js, which the
// server serves at /console. `npm run build` runs it; the browser tests call buildConsole() themselves.
//   node --import tsx scripts/build-console.ts [--out DIR]
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

export const consoleOutDir = join(root, "dist", "console");

export async function buildConsole(outDir = consoleOutDir): Promise<void> {
  mkdirSync(outDir, { recursive: true });
  await build({
    entryPoints: [join(root, "console", "src", "main.ts")],
    outfile: join(outDir, "console.js"),
    bundle: true,
    format: "esm",
    target: "es2022",
    minify: true,
    sourcemap: false,
    legalComments: "none",
    logLevel: "warning",
  });
  copyFileSync(join(root, "console", "index.html"), join(outDir, "index.html"));
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { values } = parseArgs({ options: { out: { type: "string", default: consoleOutDir } } });
  await buildConsole(values.out);
}
