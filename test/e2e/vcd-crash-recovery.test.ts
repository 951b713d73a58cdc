import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { spawnServer } from "../support/server.js";
import type { SpawnedServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { MOSCOW, UBUNTU, attr, instantiate, instantiateParams, templateHref, vcd } from "./vcd-helpers.js";

// kill -9 while a vApp is being built: the stored task survives, and the next server on the same data directory
// finishes it; the vApp reaches the state its flags asked for.
describe("a vApp instantiation interrupted by SIGKILL", () => {
  let dir: ReturnType<typeof tempDir>;
  const servers: SpawnedServer[] = [];

  beforeEach(() => {
    dir = tempDir();
  });

  afterEach(async () => {
    for (const s of servers.splice(0)) await s.kill("SIGKILL");
    dir.remove();
  });

  it("resumes after a restart and powers the vApp on", { timeout: 60_000 }, async () => {
    const env = { PROVIDER_DELAY_MS: "2000" };
    const dataDir = `${dir.path}/data`;
    const first = await spawnServer({ dataDir, env });
    servers.push(first);
    const made = await instantiate(first.url, first.token, MOSCOW, instantiateParams({ name: "survivor", deploy: true, powerOn: true, source: templateHref(first.url, UBUNTU) }));
    expect(made.status).toBe(201);
    const vappPath = new URL(made.headers.get("location")!).pathname;
    const task = (((made.doc.VApp as Record<string, unknown>).Tasks as Record<string, unknown>).Task as Record<string, string>[])[0]!;
    const taskPath = new URL(task["@_href"]!).pathname;

    // A worker has taken it and is building; then the plug is pulled.
    await sleep(500);
    const running = (await vcd(first.url, taskPath, { token: first.token })).doc.Task as unknown[];
    expect(attr(running[0], "status")).toBe("running");
    await first.kill("SIGKILL");
    servers.splice(servers.indexOf(first), 1);

    const second = await spawnServer({ dataDir, env });
    servers.push(second);
    const during = await vcd(second.url, vappPath, { token: second.token });
    expect(during.doc.VApp).toMatchObject({ "@_status": "0", "@_deployed": "false" });

    await expect
      .poll(async () => ((await vcd(second.url, taskPath, { token: second.token })).doc.Task as Record<string, string>[])[0]!["@_status"], { timeout: 20_000, interval: 200 })
      .toBe("success");
    const after = await vcd(second.url, vappPath, { token: second.token });
    expect(after.doc.VApp).toMatchObject({ "@_status": "4", "@_deployed": "true", "@_name": "survivor" });
    expect(second.logs()).toContain("resuming unfinished task");
  });
});
