import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

// Connect's "@connectrpc/connect/protocol*" entry points are @private (not covered by semver): they are imported
// in exactly one module, src/transport/connect/connect-internals.ts, which an upgrade of the pinned versions checks.
function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : path.endsWith(".ts") ? [path] : [];
  });
}

describe("Connect's private entry points", () => {
  it("are imported by connect-internals.ts alone", () => {
    const importers = ["src", "test", "bench"]
      .flatMap(sources)
      .filter((path) => /from "@connectrpc\/connect\/protocol/.test(readFileSync(path, "utf8")))
      .filter((path) => !path.endsWith("connect-internals.test.ts"));
    expect(importers).toEqual([join("src", "transport", "connect", "connect-internals.ts")]);
  });

  it("come from exactly pinned versions", () => {
    const pkg = JSON.parse(readFileSync("package.json", "utf8")) as { dependencies: Record<string, string> };
    for (const name of ["@connectrpc/connect", "@connectrpc/connect-node"]) expect(pkg.dependencies[name]).toMatch(/^\d+\.\d+\.\d+$/);
  });
});
