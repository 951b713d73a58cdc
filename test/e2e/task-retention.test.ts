import { randomUUID } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import type { JsonObject } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { FakeClock } from "../support/fake-clock.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { CLUSTER, FLAVOR, ORG_NETWORK, VAPP_TEMPLATE, VDC, base64, rest, restNodePoolId, writeTestCatalog } from "./compute-helpers.js";
import { attr, errorXml, instantiate, instantiateParams, templateHref, vcd } from "./vcd-helpers.js";
import type { XmlResponse } from "./vcd-helpers.js";

// Finished tasks do not pile up forever: a server deletes those that finished more than TASK_RETENTION_SECONDS ago
// (30 days by default) at every sweep. The server runs on a fake clock moved by days. A deleted task reads as one
// that never existed, on REST and on the XML surface; its node pool and vApp read as they did once it finished.

const DAY = 24 * 3600 * 1000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let server: TestServer;
let catalogDir: ReturnType<typeof tempDir>;
const clock = new FakeClock();

beforeAll(async () => {
  catalogDir = tempDir();
  server = await startServer({ clock, env: { CATALOG_FILE: writeTestCatalog(catalogDir.path), SWEEP_INTERVAL_SECONDS: "1", LOG_LEVEL: "info" } });
});

afterAll(async () => {
  await server?.stop();
  catalogDir?.remove();
});

// A node pool created over REST and its task, waited for to the end.
async function createPool(name: string): Promise<{ nodePoolId: string; taskId: string }> {
  const created = await rest(server.url, "POST", `/cluster/v1/${VDC}/node-pools`, {
    clusterId: CLUSTER,
    nodeConfig: { computeFlavor: FLAVOR },
    nodePoolName: name,
    scalePolicy: { fixedScale: { count: 1 } },
  });
  expect(created.status).toBe(200);
  const task = created.json.task as JsonObject;
  const done = await rest(server.url, "POST", `/cluster/v1/${VDC}/tasks/${String(task.id)}:wait`, { timeout: "30s" });
  expect((done.json.task as JsonObject).status).toBe("SUCCEEDED");
  return { nodePoolId: restNodePoolId(task), taskId: String(task.id) };
}

// A vApp instantiated over the XML surface and its task, polled to the end.
async function createVApp(name: string): Promise<{ vappId: string; taskId: string }> {
  const made = await instantiate(server.url, server.token, VDC, instantiateParams({ name, network: ORG_NETWORK, source: templateHref(server.url, VAPP_TEMPLATE) }));
  expect(made.status).toBe(201);
  const vappId = attr(made.doc.VApp, "id")!.replace("urn:vcloud:vapp:", "");
  const task = (((made.doc.VApp as Record<string, unknown>).Tasks as Record<string, unknown>).Task as Record<string, string>[])[0]!;
  const taskId = task["@_id"]!.replace("urn:vcloud:task:", "");
  for (let i = 0; i < 200; i++) {
    const status = attr(((await readVAppTask(taskId)).doc.Task as unknown[] | undefined)?.[0], "status");
    if (status === "success") return { vappId, taskId };
    await sleep(25);
  }
  throw new Error(`vApp task ${taskId} did not finish`);
}

function readVAppTask(taskId: string): Promise<XmlResponse> {
  return vcd(server.url, `/api/task/${taskId}`, { token: server.token });
}

// Exactly what GetTask answers over REST for a task id the service instance does not have.
function taskNotFoundJson(taskId: string): { status: number; json: JsonObject } {
  const message = `service instance ${VDC} has no task ${taskId}`;
  return {
    status: 404,
    json: {
      code: 5,
      message,
      details: [
        { typeUrl: "type.googleapis.com/google.rpc.ErrorInfo", value: base64(toBinary(ErrorInfoSchema, create(ErrorInfoSchema, { reason: "TASK_NOT_FOUND", domain: "compute" }))) },
        {
          typeUrl: "type.googleapis.com/google.rpc.ResourceInfo",
          value: base64(
            toBinary(ResourceInfoSchema, create(ResourceInfoSchema, { resourceType: "compute.cluster.v1.Task", resourceName: taskId, owner: VDC, description: message })),
          ),
        },
      ],
    },
  };
}

async function listedTaskIds(): Promise<string[]> {
  const listed = await rest(server.url, "GET", `/cluster/v1/${VDC}/tasks`);
  expect(listed.status).toBe(200);
  return ((listed.json.tasks as JsonObject[] | undefined) ?? []).map((t) => String(t.id));
}

describe("task retention", () => {
  it("keeps 30 days by default, then deletes finished tasks: NOT_FOUND as never-existing ids, the pool and vApp still readable", async () => {
    expect(server.config.taskRetentionMs).toBe(30 * DAY);
    const old = await createPool("old-pool");
    const oldVApp = await createVApp("old-vapp");
    // What the pool and the vApp read once their tasks finished: the reads after the deletion must be the same.
    const poolBefore = await rest(server.url, "GET", `/cluster/v1/${VDC}/node-pools/${old.nodePoolId}`);
    expect(poolBefore.json.nodePool).toMatchObject({ state: "RUNNING" });
    const vappBefore = await vcd(server.url, `/api/vApp/vapp-${oldVApp.vappId}`, { token: server.token });
    expect(vappBefore.status).toBe(200);
    expect(vappBefore.text).not.toContain("<Tasks>");

    // 29 days on, a sweep or more later, nothing is old enough yet.
    clock.advance(29 * DAY);
    await sleep(1500);
    expect((await rest(server.url, "GET", `/cluster/v1/${VDC}/tasks/${old.taskId}`)).status).toBe(200);
    const recent = await createPool("recent-pool");

    // Two days more: the old tasks are 31 days past their end, the recent one 2 days.
    clock.advance(2 * DAY);
    const deadline = Date.now() + 15_000;
    while ((await rest(server.url, "GET", `/cluster/v1/${VDC}/tasks/${old.taskId}`)).status === 200 && Date.now() < deadline) await sleep(200);

    // GetTask and WaitTask: exactly the answer for an id that never existed.
    expect(await rest(server.url, "GET", `/cluster/v1/${VDC}/tasks/${old.taskId}`)).toEqual(taskNotFoundJson(old.taskId));
    expect(await rest(server.url, "POST", `/cluster/v1/${VDC}/tasks/${old.taskId}:wait`, { timeout: "0s" })).toEqual(taskNotFoundJson(old.taskId));
    const never = randomUUID();
    expect(await rest(server.url, "GET", `/cluster/v1/${VDC}/tasks/${never}`)).toEqual(taskNotFoundJson(never));
    // ListTasks lists the recent task alone.
    expect(await listedTaskIds()).toEqual([recent.taskId]);
    // The pool reads as it did and takes a new change.
    expect(await rest(server.url, "GET", `/cluster/v1/${VDC}/node-pools/${old.nodePoolId}`)).toEqual(poolBefore);
    const rescaled = await rest(server.url, "PATCH", `/cluster/v1/${VDC}/node-pools/${old.nodePoolId}`, { scalePolicy: { fixedScale: { count: 2 } } });
    expect(rescaled.status).toBe(200);

    // The vApp's task: the XML surface's 404 Error document, as for a task id that never existed.
    const gone = await readVAppTask(oldVApp.taskId);
    expect({ status: gone.status, text: gone.text }).toEqual({
      status: 404,
      text: errorXml(404, "RESOURCE_NOT_FOUND", `task ${oldVApp.taskId} not found`, "VAPP_TASK_NOT_FOUND"),
    });
    const neverVApp = await readVAppTask(never);
    expect(neverVApp.text).toBe(errorXml(404, "RESOURCE_NOT_FOUND", `task ${never} not found`, "VAPP_TASK_NOT_FOUND"));
    // The vApp reads exactly as it did once its task had finished.
    const vappAfter = await vcd(server.url, `/api/vApp/vapp-${oldVApp.vappId}`, { token: server.token });
    expect({ status: vappAfter.status, text: vappAfter.text }).toEqual({ status: 200, text: vappBefore.text });

    expect(server.logs()).toContain("deleted finished tasks older than the retention period");
    expect(server.logs()).not.toContain("deleting old finished tasks failed");
  });

  it("refuses a retention that is not a whole number of seconds from 0 (forever) up, and starts no server", async () => {
    for (const bad of ["-1", "1.5", "30d"]) {
      await expect(startServer({ env: { TASK_RETENTION_SECONDS: bad } })).rejects.toThrow(
        `--task-retention-seconds (TASK_RETENTION_SECONDS) must be an integer from 0 to 3153600000, got "${bad}"`,
      );
    }
  });
});
