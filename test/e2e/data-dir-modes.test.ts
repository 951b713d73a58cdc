import { chmodSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminAuth } from "../support/credentials.js";
import { spawnServer, startServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";

// The files of the data directory hold the master key, the wrapped key material and the bootstrapped admin's
// client secret: readable by the server's user only, whatever the umask and the mode of the directory the operator
// prepared.

const files = ["cloudplane.db", "cloudplane.db-wal", "cloudplane.db-shm", "master.key", "admin-credentials.json"];

function modes(dataDir: string): Record<string, string> {
  return Object.fromEntries(files.map((f) => [f, (statSync(join(dataDir, f)).mode & 0o777).toString(8)]));
}

const allPrivate = Object.fromEntries(files.map((f) => [f, "600"]));

async function createKey(url: string): Promise<string> {
  const res = await fetch(`${url}/v1/keys`, { method: "POST", headers: { "content-type": "application/json", ...adminAuth(url) }, body: '{"parentId": "modes"}' });
  expect(res.status).toBe(200);
  return ((await res.json()) as { id: string }).id;
}

describe("data directory file modes", () => {
  const dir = tempDir();
  let umask: number;

  beforeAll(() => {
    // Vitest runs each file in a process of its own, so this umask (inherited by spawned servers) touches no other file.
    umask = process.umask(0);
  });

  afterAll(() => {
    process.umask(umask);
    dir.remove();
  });

  it("are 0600 in a directory created 0777 under umask 0", async () => {
    const dataDir = join(dir.path, "fresh");
    mkdirSync(dataDir, { mode: 0o777 });
    expect(statSync(dataDir).mode & 0o777).toBe(0o777);
    // No MASTER_KEY: the server makes master.key in the data directory.
    const server = await startServer({ dataDir, env: { MASTER_KEY: "" } });
    try {
      await createKey(server.url);
      expect(modes(dataDir)).toEqual(allPrivate);
    } finally {
      await server.stop();
    }
  });

  it("are brought back to 0600 when an earlier run left them wider", async () => {
    const dataDir = join(dir.path, "left-behind");
    mkdirSync(dataDir, { mode: 0o777 });
    let server = await spawnServer({ dataDir, env: { MASTER_KEY: "" } });
    const keyId = await createKey(server.url);
    // Killed, so -wal and -shm stay behind with their content, as after a crash.
    await server.kill("SIGKILL");
    for (const f of files) chmodSync(join(dataDir, f), 0o644);

    server = await spawnServer({ dataDir, env: { MASTER_KEY: "" } });
    try {
      expect(modes(dataDir)).toEqual(allPrivate);
      expect((await fetch(`${server.url}/v1/keys/${keyId}`, { headers: adminAuth(server.url) })).status).toBe(200);
    } finally {
      await server.kill("SIGKILL");
    }
  });
});
