import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createKmsClient } from "../support/kms-clients.js";
import { rewrapPausedAt, runRewrap, startExpectingRefusal } from "../support/master-key-processes.js";
import { spawnServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";

// One server per SQLite data directory (docs/storage.md, "One server per data directory"): on 82d22ee a second
// server on the directory of a running one started, and kept encrypting with a key version the first had disabled
// (SQLite tells no other process of a change). Now it refuses with exit 2, whatever it finds; a server killed with
// SIGKILL does not block the next start; and the re-wrap command and the server still exclude each other.

const ownLayout = { MASTER_KEY: "" };

// Every file of the directory with its content, but the database's (the running server writes to it).
function files(dataDir: string): Record<string, string> {
  const kept = readdirSync(dataDir).filter((name) => !name.startsWith("cloudplane.db"));
  return Object.fromEntries(kept.map((name) => [name, readFileSync(join(dataDir, name), "base64")]));
}

describe("one server per SQLite data directory", () => {
  const dir = tempDir();
  const dataDir = join(dir.path, "data");
  afterAll(() => dir.remove());

  const inUse =
    `cloudplane failed to start: the data directory ${dataDir} is in use: another cloudplane server holds ` +
    `${join(dataDir, "cloudplane.lock")}. Stop that server first; to run several servers on one store, point them all ` +
    'at one PostgreSQL database (DATABASE_URL, README "Scale-out")\n';

  it("refuses a second server while one runs, changing nothing, and lets one start after a SIGKILL", async () => {
    const first = await spawnServer({ dataDir, env: ownLayout });
    const kms = createKmsClient("grpc", first.url);
    const keyId = (await kms.createKey({ parentId: "lock" })).id!;
    const before = files(dataDir);

    const second = await startExpectingRefusal(dataDir, ownLayout);
    expect(second.code).toBe(2);
    expect(second.stderr).toBe(inUse);
    expect(second.stdout).toBe("");
    expect(files(dataDir)).toEqual(before);
    expect((await kms.getKey(keyId)).id).toBe(keyId);
    await kms.close();

    expect(await first.kill("SIGKILL")).toBeNull();
    const next = await spawnServer({ dataDir, env: ownLayout });
    const again = createKmsClient("grpc", next.url);
    expect((await again.getKey(keyId)).id).toBe(keyId);
    await again.close();
    await next.kill("SIGTERM");
  });

  it("the re-wrap command and the server still exclude each other, both ways", async () => {
    const newKey = join(dir.path, "new.key");
    writeFileSync(newKey, randomBytes(32), { mode: 0o600 });
    const server = await spawnServer({ dataDir, env: ownLayout });
    const busy = await runRewrap(dataDir, newKey);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toBe(`rewrap-master-key failed: ${join(dataDir, "cloudplane.db")} is in use (a server or another command has it open): stop it first\n`);
    await server.kill("SIGTERM");

    const rewrap = await rewrapPausedAt(dataDir, newKey, "verified");
    const refused = await startExpectingRefusal(dataDir, ownLayout);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(
      `cloudplane failed to start: ${join(dataDir, "cloudplane.db")} is open in another process: an operator command (npm run rewrap-master-key, cloudplane-admin), or a cloudplane server of an older build, which holds no cloudplane.lock. Wait for the command to finish, or stop that server, then start again\n`,
    );
    await rewrap.kill();
    const after = await spawnServer({ dataDir, env: ownLayout });
    await after.kill("SIGTERM");
  });
});
