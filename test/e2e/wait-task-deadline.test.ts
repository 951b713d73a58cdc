import type { JsonObject } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TaskService } from "../../gen/compute/cluster/v1/task_pb.js";
import { adminAuth } from "../support/credentials.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { wireCall, wireProtocolsOf } from "../support/wire-call.js";
import type { WireAnswer, WireProtocol } from "../support/wire-call.js";
import { FLAVOR, ROOMY_CLUSTER, VDC, rest, writeTestCatalog } from "./compute-helpers.js";

// WaitTask with a wait longer than its caller's deadline, on a task that stays PENDING: the caller's deadline ends
// the call with DEADLINE_EXCEEDED, the same answer on every protocol and both call paths. On the calls connect-node
// serves, its own deadline timer raced the pipeline's, and the task came back OK on some protocols and runs
// (a probe, 2026-11-27).

const protocols: [WireProtocol, Record<string, string>][] = [
  ...wireProtocolsOf(TaskService.method.waitTask).map((p): [WireProtocol, Record<string, string>] => [p, {}]),
  ["grpc-web-text", {}],
  // Served by connect-node on the direct path too.
  ["grpc", { "grpc-encoding": "gzip" }],
];

describe.each(["direct", "connect"])("WaitTask past its caller's deadline, on the %s call path", (callPath) => {
  let server: TestServer;
  let catalogDir: ReturnType<typeof tempDir>;
  let taskId = "";

  beforeAll(async () => {
    catalogDir = tempDir();
    // Each node takes ten minutes: the task stays unfinished for the whole test.
    server = await startServer({ env: { CALL_PATH: callPath, CATALOG_FILE: writeTestCatalog(catalogDir.path), PROVIDER_DELAY_MS: "600000" } });
    const body = { clusterId: ROOMY_CLUSTER, nodeConfig: { computeFlavor: FLAVOR }, nodePoolName: "slow", scalePolicy: { fixedScale: { count: 1 } } };
    const created = await rest(server.url, "POST", `/cluster/v1/${VDC}/node-pools`, body);
    expect(created.status).toBe(200);
    taskId = String((created.json.task as JsonObject).id);
  });

  afterAll(async () => {
    await server.stop();
    catalogDir.remove();
  });

  it.each(protocols)("%s %j: DEADLINE_EXCEEDED, two runs alike", async (protocol, extra) => {
    const answers: WireAnswer[] = [];
    for (let run = 0; run < 2; run++) {
      const answer = await wireCall(
        server.url,
        protocol,
        TaskService.method.waitTask,
        { serviceInstanceId: VDC, taskId, timeout: { seconds: 10n } },
        { ...adminAuth(server.url), "grpc-timeout": "150m", "connect-timeout-ms": "150", ...extra },
      );
      answers.push(answer);
    }
    for (const answer of answers) {
      expect({ code: answer.code, message: answer.message, response: answer.response }).toEqual({
        code: 4,
        message: "the call did not finish within its deadline",
        response: undefined,
      });
      expect(answer.details).toEqual([{ "@type": "google.rpc.ErrorInfo", reason: "DEADLINE_EXCEEDED", domain: "compute" }]);
    }
  });
});
