import type { JsonObject } from "@bufbuild/protobuf";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { spawnServer } from "../support/server.js";
import type { SpawnedServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { CLUSTER, FLAVOR, VDC, rest, restNodePoolId, writeTestCatalog } from "./compute-helpers.js";

// kill -9 in the middle of provisioning: the stored task survives, and the next server on the same data
// directory finishes it.
describe("a node pool task interrupted by SIGKILL", () => {
  let dir: ReturnType<typeof tempDir>;
  const servers: SpawnedServer[] = [];

  beforeEach(() => {
    dir = tempDir();
  });

  afterEach(async () => {
    for (const s of servers.splice(0)) await s.kill("SIGKILL");
    dir.remove();
  });

  // A server on a new data directory, and a pool being created on it; the create task's path.
  async function creating(env: Record<string, string>, nodePoolName: string, count: number): Promise<{ first: SpawnedServer; task: JsonObject; taskPath: string }> {
    const first = await spawnServer({ dataDir: `${dir.path}/data`, env });
    servers.push(first);
    const created = await rest(first.url, "POST", `/cluster/v1/${VDC}/node-pools`, {
      clusterId: CLUSTER,
      nodeConfig: { computeFlavor: FLAVOR },
      nodePoolName,
      scalePolicy: { fixedScale: { count } },
    });
    expect(created.status).toBe(200);
    const task = created.json.task as JsonObject;
    return { first, task, taskPath: `/cluster/v1/${VDC}/tasks/${String(task.id)}` };
  }

  it("resumes after a restart on the same data directory and leaves the pool RUNNING", { timeout: 120_000 }, async () => {
    const env = { CATALOG_FILE: writeTestCatalog(dir.path), PROVIDER_DELAY_MS: "1500" };
    const dataDir = `${dir.path}/data`;
    const { first, task, taskPath } = await creating(env, "survivor", 4);
    const nodePoolId = restNodePoolId(task);

    // Wait until a worker runs it and the first node is up, then pull the plug.
    await expect.poll(async () => ((await rest(first.url, "GET", taskPath)).json.task as JsonObject).status, { timeout: 10_000 }).toBe("RUNNING");
    await sleep(1600);
    await first.kill("SIGKILL");
    servers.splice(servers.indexOf(first), 1);

    const second = await spawnServer({ dataDir, env });
    servers.push(second);
    const pool = await rest(second.url, "GET", `/cluster/v1/${VDC}/node-pools/${nodePoolId}`);
    expect((pool.json.nodePool as JsonObject).state).toBe("PROVISIONING");

    const waited = await rest(second.url, "POST", `${taskPath}:wait`, { timeout: "60s" });
    expect(waited.status).toBe(200);
    expect(waited.json.task).toMatchObject({ id: task.id, status: "SUCCEEDED", done: true, createdAt: task.createdAt });
    const after = await rest(second.url, "GET", `/cluster/v1/${VDC}/node-pools/${nodePoolId}`);
    expect(after.json.nodePool).toMatchObject({ name: "survivor", state: "RUNNING", scalePolicy: { fixedScale: { count: 4 } } });
    expect(second.logs()).toContain("resuming unfinished task");
  });

  // A probe of the clock (2026-11-28): a server killed while its clock was an hour ahead, restarted once the clock was
  // set right (an NTP step), left the task RUNNING for that hour: the dead worker's last heartbeat looked fresh.
  it("is resumed at once after the clock stepped back: the data directory's lock proves its worker dead", { timeout: 60_000 }, async () => {
    const env = { CATALOG_FILE: writeTestCatalog(dir.path), PROVIDER_DELAY_MS: "1000" };
    const dataDir = `${dir.path}/data`;
    const { first, taskPath } = await creating(env, "ahead", 2);
    await expect.poll(async () => ((await rest(first.url, "GET", taskPath)).json.task as JsonObject).status, { timeout: 10_000 }).toBe("RUNNING");
    await first.kill("SIGKILL");
    servers.splice(servers.indexOf(first), 1);
    // Its heartbeat as a clock an hour ahead wrote it.
    const db = new Database(`${dataDir}/cloudplane.db`);
    db.prepare("UPDATE compute_workers SET heartbeat_at = ?").run(Date.now() + 3_600_000);
    db.close();

    const second = await spawnServer({ dataDir, env });
    servers.push(second);
    const waited = await rest(second.url, "POST", `${taskPath}:wait`, { timeout: "20s" });
    expect(waited.json.task).toMatchObject({ status: "SUCCEEDED", done: true });
    expect(second.logs()).toContain("resuming unfinished task");
  });
});
