import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAdminCli } from "../support/principals.js";
import { tempDir } from "../support/temp-dir.js";

// cloudplane-admin works on the store a server made in its data directory. A directory without one (a typo) is
// refused by every command, which creates nothing there: a new empty store would list nothing and take accounts
// whose credentials no server knows (docs/access.md).

let root: ReturnType<typeof tempDir>;

beforeAll(() => {
  root = tempDir();
});

afterAll(() => {
  root?.remove();
});

const commands: string[][] = [
  ["accounts", "list"],
  ["accounts", "create", "app", "--grant", "viewer@*"],
  ["accounts", "revoke", "app"],
  ["tokens", "revoke", "app"],
  ["api-keys", "create", "app", "--workspace", "ws"],
  ["api-keys", "list"],
  ["api-keys", "revoke", "k"],
  ["grants", "add", "app", "viewer", "*"],
  ["grants", "list"],
  ["grants", "remove", "g"],
  ["audit"],
  ["audit", "prune", "--before", "2026-01-01T00:00:00Z"],
];

function refusal(dir: string): string {
  return `cloudplane-admin: ${join(dir, "cloudplane.db")} does not exist: ${dir} is not a data directory of cloudplane\n(give the server's --data-dir or DATA_DIR; the server makes its store there on its first start)\n`;
}

describe("cloudplane-admin --data-dir", () => {
  it("that does not exist is refused by every command with exit 2, and not created", async () => {
    const missing = join(root.path, "dta");
    const results = await Promise.all(commands.map((args) => runAdminCli(missing, args)));
    for (const [i, result] of results.entries()) {
      expect({ args: commands[i], ...result }).toEqual({ args: commands[i], exitCode: 2, stdout: "", stderr: refusal(missing) });
    }
    expect(existsSync(missing)).toBe(false);
  });

  it("that exists but holds no store is refused alike, and left empty", async () => {
    const empty = tempDir();
    try {
      const results = await Promise.all([["accounts", "list"], ["accounts", "create", "app"], ["--json", "audit"]].map((args) => runAdminCli(empty.path, args)));
      for (const result of results) expect(result).toEqual({ exitCode: 2, stdout: "", stderr: refusal(empty.path) });
      expect(readdirSync(empty.path)).toEqual([]);
    } finally {
      empty.remove();
    }
  });

  it("is not looked at with DATABASE_URL: the command goes to the database (here one that cannot be reached)", async () => {
    const missing = join(root.path, "unused");
    const result = await runAdminCli(missing, ["accounts", "list"], { DATABASE_URL: "postgres://cloudplane@127.0.0.1:1/db" });
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toContain("could not open the PostgreSQL database of DATABASE_URL");
    expect(result.stderr).not.toContain("is not a data directory");
    expect(existsSync(missing)).toBe(false);
  });
});
