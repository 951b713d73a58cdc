import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { tempDir } from "../support/temp-dir.js";

// Node loads some of its own modules only on first use, compiling them on the event loop. One a server's calls
// need is loaded while it starts, not by its first caller, who would hold up everyone else meanwhile.
describe("start-up", () => {
  it("loads Node's fetch globals before serving: connect-node makes a Headers of every request it reads", () => {
    const dir = tempDir();
    try {
      const undici = "internal/deps/undici/undici";
      const out = execFileSync(process.execPath, ["--import", "tsx", "test/support/lazy-modules.ts", dir.path, undici], { encoding: "utf8" });
      // Not loaded by importing the server's modules (so the check below can fail), loaded once it is built.
      expect(JSON.parse(out)).toEqual({ before: [], after: [undici] });
    } finally {
      dir.remove();
    }
  });
});
