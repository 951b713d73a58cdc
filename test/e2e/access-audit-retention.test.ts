import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { adminJson, runAdminCli } from "../support/principals.js";
import { FakeClock } from "../support/fake-clock.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { wireCall } from "../support/wire-call.js";

// The audit trail does not grow forever: a server deletes the records older than AUDIT_RETENTION_SECONDS (90 days
// by default) at every sweep, and an operator deletes older ones by hand with `cloudplane-admin audit prune`. The
// server runs on a fake clock moved by days; the trail is read as an operator reads it.

const DAY = 24 * 3600 * 1000;
const kms = KeyManagerService.method;

interface AuditLine {
  at: string;
  method: string;
  requestId: string;
}

let server: TestServer;
const clock = new FakeClock();
let keyId: string;

// One audited call (a gRPC Encrypt) at the fake clock's time now, with the request id given.
async function encryptAt(requestId: string): Promise<void> {
  const answer = await wireCall(server.url, "grpc", kms.encrypt, { keyId, keyVersionId: 1, plaintext: Buffer.from("x") }, { ...admin(), "x-request-id": requestId });
  expect(answer.code).toBe(0);
}

function admin(): { authorization: string } {
  return { authorization: `Bearer ${server.token}` };
}

async function trail(): Promise<string[]> {
  return (await adminJson<AuditLine>(server.dataDir, ["audit", "--limit", "100000"])).map((l) => l.requestId).filter((id) => id.startsWith("at-"));
}

beforeAll(async () => {
  server = await startServer({ clock, env: { SWEEP_INTERVAL_SECONDS: "1" } });
  const created = await wireCall(server.url, "rest", kms.createCryptoKey, { parentId: "retention", name: "k" }, admin());
  keyId = (created.response as { id: string }).id;
});

afterAll(async () => {
  await server?.stop();
});

describe("audit retention", () => {
  it("keeps 90 days by default and deletes what grows older at the next sweep, the newer records untouched", async () => {
    expect(server.config.auditRetentionMs).toBe(90 * DAY);
    await encryptAt("at-day-0");
    clock.advance(89 * DAY);
    await encryptAt("at-day-89");
    clock.advance(2 * DAY);
    await encryptAt("at-day-91");
    // The first sweep after the clock moved deletes day 0's records (91 days old), not day 89's (2 days old).
    const deadline = Date.now() + 15_000;
    while ((await trail()).includes("at-day-0") && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await trail()).toEqual(["at-day-89", "at-day-91"]);
    const swept = server.logs();
    expect(swept).not.toContain("deleting old audit records failed");
  });

  it("deletes by hand what an operator names with audit prune --before, and nothing newer", async () => {
    const lines = await adminJson<AuditLine>(server.dataDir, ["audit", "--limit", "100000"]);
    const day91 = lines.find((l) => l.requestId === "at-day-91")!.at;
    const pruned = await adminJson<{ before: string; batches: number }>(server.dataDir, ["audit", "prune", "--before", day91]);
    expect(pruned).toHaveLength(1);
    expect(pruned[0]!.before).toBe(day91);
    expect(pruned[0]!.batches).toBeGreaterThanOrEqual(1);
    expect(await trail()).toEqual(["at-day-91"]);
    // The server goes on recording.
    await encryptAt("at-day-91-later");
    expect(await trail()).toEqual(["at-day-91", "at-day-91-later"]);
  });

  it("refuses audit prune without --before, with a bad time or a time to come, and deletes nothing", async () => {
    const before = await trail();
    const refusals = [
      { args: ["audit", "prune"], message: "audit prune needs --before T" },
      { args: ["audit", "prune", "--before", "yesterday"], message: '--before must be an ISO 8601 time such as 2026-11-23T10:00:00Z, got "yesterday"' },
      // Date.parse took these as 2001-12-01 and March 2 (a probe of the clock, 2026-11-28).
      { args: ["audit", "prune", "--before", "12"], message: '--before must be an ISO 8601 time such as 2026-11-23T10:00:00Z, got "12"' },
      { args: ["audit", "prune", "--before", "2026-02-30T00:00:00Z"], message: '--before must be an ISO 8601 time such as 2026-11-23T10:00:00Z, got "2026-02-30T00:00:00Z"' },
      { args: ["audit", "prune", "--before", "2999-01-01T00:00:00Z"], message: "--before must not be later than now, got 2999-01-01T00:00:00.000Z" },
    ];
    for (const { args, message } of refusals) {
      const result = await runAdminCli(server.dataDir, args);
      expect({ exitCode: result.exitCode, stdout: result.stdout }).toEqual({ exitCode: 2, stdout: "" });
      expect(result.stderr).toContain(`cloudplane-admin: ${message}`);
    }
    expect(await trail()).toEqual(before);
  });

  it("refuses a retention that is not a whole number of seconds from 0 (forever) up, and starts no server", async () => {
    for (const bad of ["-1", "1.5", "90d"]) {
      await expect(startServer({ env: { AUDIT_RETENTION_SECONDS: bad } })).rejects.toThrow(
        `--audit-retention-seconds (AUDIT_RETENTION_SECONDS) must be an integer from 0 to 3153600000, got "${bad}"`,
      );
    }
  });
});
