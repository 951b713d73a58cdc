import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makePrincipal, runAdminCli } from "../support/principals.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// `cloudplane-admin audit` prints records a caller's text went into: its plain output must not let that text drive
// the operator's terminal or forge records (docs/access.md, "Audit trail"). The ids of a record's resource are
// percent-encoded, so that text reaches the output through the scope (the namespace a caller names).

let server: TestServer;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
});

// ESC [2J (clear the screen), ESC [31m, then a newline and a tab-separated line that looks like a record of the admin.
const FORGED = "%1b%5b2J%1b%5b31mX%0a2026-11-27T09:00:00.000Z%09principal-admin%09kms.v1.KeyManagerService%2FDestroyCryptoKey%09rest";
const DECODED = "\u001b[2J\u001b[31mX\n2026-11-27T09:00:00.000Z\tprincipal-admin\tkms.v1.KeyManagerService/DestroyCryptoKey\trest";
const ENCODED = "%1B%5B2J%1B%5B31mX%0A2026-11-27T09%3A00%3A00.000Z%09principal-admin%09kms.v1.KeyManagerService%2FDestroyCryptoKey%09rest";

describe("cloudplane-admin audit, plain output", () => {
  it("escapes every unprintable character of a record as \\uXXXX, so a caller's text forges no record and sends no escape", async () => {
    const viewer = await makePrincipal(server, "forger", [["viewer", "kms-namespace:ns1"]]);
    // A key id in the path: recorded percent-encoded. A namespace in the query: the scope it was refused on, as sent.
    for (const path of [`/v1/keys/${FORGED}`, `/v1/keys?parentId=${FORGED}`]) {
      const answer = await fetch(`${server.url}${path}`, { headers: viewer.auth });
      expect([path, answer.status]).toEqual([path, path.includes("?") ? 403 : 404]);
      await answer.body?.cancel();
    }

    const result = await runAdminCli(server.dataDir, ["audit", "--principal", "forger"]);
    expect(result.exitCode).toBe(0);
    expect(result.stderr).toBe("");
    // The viewer's login (service_auth) is recorded too; then its two GETs.
    const lines = result.stdout.split("\n").filter((l) => l !== "" && !l.includes("/public/v2/service_auth"));
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      // Nothing of category C is left but the tabs between the eight fields.
      expect(/[\p{C}]/u.test(line.replaceAll("\t", ""))).toBe(false);
      const fields = line.split("\t");
      expect(fields).toHaveLength(8);
      expect(fields[1]).toBe(viewer.id);
    }
    expect(lines.map((l) => l.split("\t").slice(4, 6))).toEqual([
      ["-", `/v1/keys/${ENCODED}`],
      ["kms-namespace:\\u001b[2J\\u001b[31mX\\u000a2026-11-27T09:00:00.000Z\\u0009principal-admin\\u0009kms.v1.KeyManagerService/DestroyCryptoKey\\u0009rest", "/v1/keys"],
    ]);
  });

  it("leaves --json exact: the scope as it was named, the resource with its id percent-encoded", async () => {
    const result = await runAdminCli(server.dataDir, ["--json", "audit", "--principal", "forger"]);
    expect(result.exitCode).toBe(0);
    const records = result.stdout.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as { scope: string; resource: string });
    expect(records.filter((r) => r.resource.startsWith("/v1/keys")).map((r) => [r.scope, r.resource])).toEqual([
      ["", `/v1/keys/${ENCODED}`],
      [`kms-namespace:${DECODED}`, "/v1/keys"],
    ]);
  });
});
