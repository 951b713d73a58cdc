import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminJson, makePrincipal, runAdminCli } from "../support/principals.js";
import type { Principal } from "../support/principals.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// `cloudplane-admin audit` shows at most --limit records (1000 by default), oldest first. When more match it says
// so on stderr, with how to see them; a time range that can match nothing is refused; an --principal that names no
// account is said to (docs/access.md, "Audit trail").

let server: TestServer;
let reader: Principal;

interface Line {
  at: string;
  resource: string;
}

// GETs of keys that do not exist: each is recorded (NOT_FOUND) under the reader's principal.
async function calls(n: number, from = 0): Promise<void> {
  for (let start = 0; start < n; start += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, n - start) }, async (_, i) => {
        const answer = await fetch(`${server.url}/v1/keys/missing-${from + start + i}`, { headers: reader.auth });
        await answer.body?.cancel();
      }),
    );
  }
}

beforeAll(async () => {
  server = await startServer();
  reader = await makePrincipal(server, "reader", [["viewer", "kms-namespace:ns1"]]);
  // With its login, 1002 records of the reader: one more than the default limit shows... and one to spare.
  await calls(1001);
});

afterAll(async () => {
  await server?.stop();
});

describe("cloudplane-admin audit", () => {
  it("says on stderr when --limit cut, how many were shown and how to see the rest", async () => {
    const result = await runAdminCli(server.dataDir, ["--json", "audit", "--principal", "reader", "--limit", "3"]);
    expect(result.exitCode).toBe(0);
    const lines = result.stdout.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Line);
    expect(lines).toHaveLength(3);
    expect(result.stderr).toBe(
      `cloudplane-admin: showed 3 audit record(s), the oldest that match (--limit 3); more exist. See them with a larger --limit, or the next ones with --since ${lines[2]!.at} (the records of that millisecond shown again), or narrow with --until, --principal or --resource.\n`,
    );
  });

  it("shows 1000 by default, and says that this is the default", async () => {
    const result = await runAdminCli(server.dataDir, ["audit", "--principal", "reader"]);
    expect(result.exitCode).toBe(0);
    const lines = result.stdout.split("\n").filter((l) => l !== "");
    expect(lines).toHaveLength(1000);
    const last = lines[999]!.split("\t")[0];
    expect(result.stderr).toBe(
      `cloudplane-admin: showed 1000 audit record(s), the oldest that match (--limit 1000, the default); more exist. See them with a larger --limit, or the next ones with --since ${last} (the records of that millisecond shown again), or narrow with --until, --principal or --resource.\n`,
    );
  });

  it("says nothing when every match was shown", async () => {
    const all = await adminJson<Line>(server.dataDir, ["audit", "--principal", "reader", "--limit", "100000"]);
    expect(all).toHaveLength(1002);
    const exact = await runAdminCli(server.dataDir, ["audit", "--principal", "reader", "--limit", "1002"]);
    expect([exact.exitCode, exact.stderr, exact.stdout.split("\n").filter((l) => l !== "").length]).toEqual([0, "", 1002]);
  });

  it.each([
    [["--since", "2026-11-27T10:00:00Z", "--until", "2026-11-27T09:00:00Z"], "--since 2026-11-27T10:00:00.000Z and --until 2026-11-27T09:00:00.000Z"],
    [["--since", "2026-11-27T10:00:00Z", "--until", "2026-11-27T10:00:00Z"], "--since 2026-11-27T10:00:00.000Z and --until 2026-11-27T10:00:00.000Z"],
  ])("refuses a range that can match nothing: %j", async (range, got) => {
    const result = await runAdminCli(server.dataDir, ["audit", ...range]);
    expect(result).toEqual({
      exitCode: 2,
      stdout: "",
      stderr: `cloudplane-admin: --since must be earlier than --until (records are shown from --since up to, not including, --until), got ${got}\n(cloudplane-admin --help lists the commands)\n`,
    });
  });

  it("says so when --principal names no account, and shows what matches the text as a principal id", async () => {
    const result = await runAdminCli(server.dataDir, ["audit", "--principal", "raeder"]);
    expect(result).toEqual({
      exitCode: 0,
      stdout: "",
      stderr: 'cloudplane-admin: no service account has id or name "raeder": showing the records of principal id "raeder" as given\n',
    });
  });

  it("documents the default limit in --help", async () => {
    const result = await runAdminCli(server.dataDir, ["--help"]);
    expect(result.stdout).toContain("oldest first (T: ISO 8601 time); at most N of them, 1000 by\n");
  });
});
