import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminJson, runAdminCli } from "../support/principals.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// A grant whose scope names an id no call can carry would never match: it is refused, naming the rule, and nothing
// is stored (docs/access.md, "Roles, scopes and grants").

let server: TestServer;

interface GrantLine {
  id: string;
  principalId: string;
  role: string;
  scope: string;
}

beforeAll(async () => {
  server = await startServer();
  await server.app.identity.createServiceAccount("app");
});

afterAll(async () => {
  await server?.stop();
});

function refused(message: string) {
  return { exitCode: 2, stdout: "", stderr: `cloudplane-admin: ${message}\n(cloudplane-admin --help lists the commands)\n` };
}

describe("cloudplane-admin grants add", () => {
  it.each([
    ["kms-namespace:a b$", 'scope "kms-namespace:a b$" can never match: a KMS namespace (parentId) is 1-64 characters of [A-Za-z0-9._-], or * for every one'],
    [`kms-namespace:${"n".repeat(65)}`, `scope "kms-namespace:${"n".repeat(65)}" can never match: a KMS namespace (parentId) is 1-64 characters of [A-Za-z0-9._-], or * for every one`],
    ["service-instance:-vdc", 'scope "service-instance:-vdc" can never match: a service instance id is 1-64 characters of [A-Za-z0-9._-], starting with a letter or digit, or * for every one'],
    ["workspace:ws/1", 'scope "workspace:ws/1" can never match: a workspace id is 1-64 characters of [A-Za-z0-9._-], or * for every one'],
    ["kms-namespace:\u001b[2J", 'scope "kms-namespace:\\u001b[2J" can never match: a KMS namespace (parentId) is 1-64 characters of [A-Za-z0-9._-], or * for every one'],
  ])("refuses %j, storing nothing", async (scope, message) => {
    const before = await adminJson<GrantLine>(server.dataDir, ["grants", "list"]);
    expect(await runAdminCli(server.dataDir, ["grants", "add", "app", "viewer", scope])).toEqual(refused(message));
    expect(await adminJson<GrantLine>(server.dataDir, ["grants", "list"])).toEqual(before);
  });

  it("refuses such a scope in accounts create --grant, creating no account", async () => {
    const result = await runAdminCli(server.dataDir, ["accounts", "create", "app2", "--grant", "viewer@kms-namespace:a b$"]);
    expect(result).toEqual(refused('scope "kms-namespace:a b$" can never match: a KMS namespace (parentId) is 1-64 characters of [A-Za-z0-9._-], or * for every one'));
    const names = (await adminJson<{ name: string }>(server.dataDir, ["accounts", "list"])).map((a) => a.name);
    expect(names).not.toContain("app2");
  });

  it("accepts every form that can match", async () => {
    for (const scope of ["*", "kms-namespace:*", "kms-namespace:team_a.prod-1", "service-instance:vdc-a", "workspace:ws-1", `kms-namespace:${"n".repeat(64)}`]) {
      const [grant] = await adminJson<GrantLine>(server.dataDir, ["grants", "add", "app", "viewer", scope]);
      expect(grant!.scope).toBe(scope);
    }
  });
});
