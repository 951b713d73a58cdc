import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makePrincipal, runAdminCli } from "../support/principals.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// `cloudplane-admin audit` prints records a caller's text went into (the resource is the path it sent): its plain
// output must not let that text drive the operator's terminal or forge records (docs/access.md, "Audit trail").

let server: TestServer;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
});

// ESC [2J (clear the screen), ESC [31m, then a newline and a tab-separated line that looks like a record of the admin.
const FORGED = "%1b%5b2J%1b%5b31mX%0a2026-11-27T09:00:00.000Z%09principal-admin%09kms.v1.KeyManagerService%2FDestroyCryptoKey%09rest";

describe("cloudplane-admin audit, plain output", () => {
  it("escapes every unprintable character of a record as \\uXXXX, so a caller's path forges no record and sends no escape", async () => {
    const viewer = await makePrincipal(server, "forger", [["viewer", "kms-namespace:ns1"]]);
    const answer = await fetch(`${server.url}/v1/keys/${FORGED}`, { headers: viewer.auth });
    expect(answer.status).toBe(404);
    await answer.body?.cancel();

    const result = await runAdminCli(server.dataDir, ["audit", "--principal", "forger"]);
    expect(result.exitCode).toBe(0);
    expect(result.stderr).toBe("");
    // The viewer's login (service_auth) is recorded too; then its GET.
    const lines = result.stdout.split("\n").filter((l) => l !== "" && !l.includes("/public/v2/service_auth"));
    expect(lines).toHaveLength(1);
    // Nothing of category C is left but the tabs between the eight fields.
    expect(/[\p{C}]/u.test(lines[0]!.replaceAll("\t", ""))).toBe(false);
    const fields = lines[0]!.split("\t");
    expect(fields).toHaveLength(8);
    expect(fields[1]).toBe(viewer.id);
    expect(fields[5]).toBe(
      "/v1/keys/\\u001b[2J\\u001b[31mX\\u000a2026-11-27T09:00:00.000Z\\u0009principal-admin\\u0009kms.v1.KeyManagerService/DestroyCryptoKey\\u0009rest",
    );
  });

  it("leaves --json exact: the resource as it was recorded", async () => {
    const result = await runAdminCli(server.dataDir, ["--json", "audit", "--principal", "forger"]);
    expect(result.exitCode).toBe(0);
    const records = result.stdout.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as { resource: string });
    expect(records.map((r) => r.resource).filter((r) => r.startsWith("/v1/keys/"))).toEqual([
      "/v1/keys/\u001b[2J\u001b[31mX\n2026-11-27T09:00:00.000Z\tprincipal-admin\tkms.v1.KeyManagerService/DestroyCryptoKey\trest",
    ]);
  });
});
