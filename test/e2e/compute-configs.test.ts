import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigService } from "../../gen/compute/configs/v2/configs_pb.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { storeSnapshot } from "../support/store-snapshot.js";
import { wireCall, wireProtocols } from "../support/wire-call.js";

// Issue 10, the configuration calls: ListConfigs and ListSparkConfigs on every protocol, answered from the catalog
// with the platform's JSON names, behind the three headers of the public API v2.

const configs = ConfigService.method;
const WORKSPACE = "ws-configs";

// Every stored row, the audit trail included, but the task workers' heartbeats, which a timer rewrites.
function storedRows(dataDir: string): ReturnType<typeof storeSnapshot> {
  const all = storeSnapshot(dataDir);
  delete all["compute_workers"];
  return all;
}

function expected(name: string): JsonObject {
  return JSON.parse(readFileSync(join(import.meta.dirname, "expected", name), "utf8")) as JsonObject;
}

// Every leaf of `want` and `got` by its JSON path, so that a difference is reported as the field that differs
// rather than as two large documents.
function leaves(value: JsonValue, path = "", out = new Map<string, JsonValue>()): Map<string, JsonValue> {
  if (Array.isArray(value)) {
    out.set(`${path}.length`, value.length);
    value.forEach((item, i) => leaves(item, `${path}[${i}]`, out));
  } else if (value !== null && typeof value === "object") {
    out.set(`${path}{}`, Object.keys(value).sort().join(","));
    for (const [name, item] of Object.entries(value)) leaves(item, path === "" ? name : `${path}.${name}`, out);
  } else {
    out.set(path, value);
  }
  return out;
}

function expectSameFields(got: JsonValue, want: JsonValue): void {
  const wanted = leaves(want);
  const seen = leaves(got);
  for (const [path, value] of wanted) expect({ path, value: seen.get(path) }).toEqual({ path, value });
  expect([...seen.keys()].filter((path) => !wanted.has(path))).toEqual([]);
}

describe("configuration calls", () => {
  let server: TestServer;
  let headers: Record<string, string>;
  let otherWorkspaceKey: string;

  beforeAll(async () => {
    server = await startServer();
    const key = await server.app.identity.createApiKey("admin", WORKSPACE);
    otherWorkspaceKey = (await server.app.identity.createApiKey("admin", "ws-other")).text;
    headers = { authorization: server.token, "x-api-key": key.text, "x-workspace-id": WORKSPACE };
  });
  afterAll(async () => server.stop());

  const rest = (path: string, h: Record<string, string> = headers) => fetch(`${server.url}${path}`, { headers: h });

  it("answers GET /public/v2/configs?cluster_type=MT field by field as the checked-in file built from the catalog", async () => {
    const res = await rest("/public/v2/configs?cluster_type=MT");
    expect(res.status).toBe(200);
    const body = (await res.json()) as JsonObject;
    expectSameFields(body, expected("list-configs-mt.json"));
    // The platform's names, verbatim.
    const region = (body.regions as JsonObject[])[0]!;
    expect(Object.keys(region)).toEqual(expect.arrayContaining(["key", "name", "description", "nfsName", "instances_types", "ssh"]));
    expect(Object.keys(body)).toEqual(["regions", "datahub_images", "custom_images"]);
    const limits = ((region.instances_types as JsonObject[])[1]!.resource as JsonObject).limits as JsonObject;
    expect(limits).toEqual({ cpu: "3", memory: "92Gi", "nvidia.com/gpu": "1" });
  });

  it("answers INF with its own regions, distinct from MT's", async () => {
    const res = await rest("/public/v2/configs?cluster_type=INF");
    expect(res.status).toBe(200);
    const body = (await res.json()) as JsonObject;
    expectSameFields(body, expected("list-configs-inf.json"));
    const keys = (doc: JsonObject) => (doc.regions as JsonObject[]).map((r) => r.key);
    expect(keys(body)).toEqual(["DGX2-INF-001", "A100-INF-001", "SR002-INF"]);
    expect(keys(expected("list-configs-mt.json"))).toEqual(["DGX2-MT", "SR006", "SR002-MT"]);
  });

  it.each(wireProtocols.filter((p) => p !== "rest"))("answers the same document over %s", async (protocol) => {
    const answer = await wireCall(server.url, protocol, configs.listConfigs, { clusterType: "MT" }, headers);
    expect(answer.code).toBe(0);
    expectSameFields(answer.response!, expected("list-configs-mt.json"));
  });

  it("lists the spark configurations with driver and executor resources", async () => {
    const res = await rest("/public/v2/configs/spark");
    expect(res.status).toBe(200);
    const body = (await res.json()) as { configs: JsonObject[] };
    expect(body.configs.map((c) => c.key)).toEqual(["spark.small", "spark.medium", "spark.large"]);
    expect(body.configs[0]).toEqual({
      key: "spark.small",
      name: "Spark small",
      description: "Up to 4 executors of 2 vCPU, 8Gi: exploration and small ETL",
      region: "SR002-MT",
      images: [{ name: "cr.ai.cloud.ru/aicloud-base-images/spark-3.4.1-py310:0.0.6", tags: ["spark3.4.1", "python3.10"] }],
      driver: { resource: { limits: { cpu: "1", memory: "4Gi" }, requests: { cpu: "1", memory: "4Gi" } } },
      executor: { resource: { limits: { cpu: "2", memory: "8Gi" }, requests: { cpu: "2", memory: "8Gi" } }, instances: 2, max_instances: 4 },
    });
    const grpc = await wireCall(server.url, "grpc", configs.listSparkConfigs, {}, headers);
    expect(grpc.response).toEqual(body);
  });

  describe.each([
    ["missing", ""],
    ["lower case", "mt"],
    ["unknown", "XYZ"],
  ])("cluster_type %s", (_what, value) => {
    const description = value === "" ? "is required and must be one of MT, INF (MT: training and Jupyter servers, INF: deployments)" : `must be one of MT, INF (MT: training and Jupyter servers, INF: deployments), got "${value}"`;
    const details = [
      { "@type": "google.rpc.ErrorInfo", reason: "REQUEST_INVALID", domain: "compute" },
      { "@type": "google.rpc.BadRequest", fieldViolations: [{ field: "cluster_type", description }] },
    ];

    it("is INVALID_ARGUMENT naming MT and INF over REST, and changes nothing", async () => {
      const before = storedRows(server.dataDir);
      const res = await rest(`/public/v2/configs${value === "" ? "" : `?cluster_type=${value}`}`);
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ code: 3, message: `cluster_type: ${description}`, details: expect.any(Array) });
      const answer = await wireCall(server.url, "rest", configs.listConfigs, { clusterType: value }, headers);
      expect(answer.details).toEqual(details);
      expect(storedRows(server.dataDir)).toEqual(before);
    });

    it.each(wireProtocols.filter((p) => p !== "rest"))("is the same over %s", async (protocol) => {
      const answer = await wireCall(server.url, protocol, configs.listConfigs, { clusterType: value }, headers);
      expect({ code: answer.code, message: answer.message, details: answer.details }).toEqual({ code: 3, message: `cluster_type: ${description}`, details });
    });
  });

  it.each(["authorization", "x-api-key", "x-workspace-id"])("refuses a call without %s as UNAUTHENTICATED", async (header) => {
    const { [header]: _dropped, ...rest3 } = headers;
    const missing = { authorization: "Authorization", "x-api-key": "x-api-key", "x-workspace-id": "x-workspace-id" }[header]!;
    const res = await rest("/public/v2/configs?cluster_type=MT", rest3);
    expect(res.status).toBe(401);
    const body = (await res.json()) as { code: number; message: string };
    expect(body.code).toBe(16);
    // Without x-workspace-id the API key itself is refused, before the headers are counted.
    expect(body.message).toMatch(header === "x-workspace-id" ? /x-workspace-id/ : new RegExp(`missing: ${missing}$`));
    const grpc = await wireCall(server.url, "grpc", configs.listConfigs, { clusterType: "MT" }, rest3);
    expect(grpc.code).toBe(16);
    expect(grpc.details).toEqual([{ "@type": "google.rpc.ErrorInfo", reason: "UNAUTHENTICATED", domain: "compute" }]);
  });

  it("refuses an API key of another workspace as PERMISSION_DENIED", async () => {
    const res = await rest("/public/v2/configs/spark", { ...headers, "x-api-key": otherWorkspaceKey });
    expect(res.status).toBe(403);
    const grpc = await wireCall(server.url, "grpc", configs.listSparkConfigs, {}, { ...headers, "x-api-key": otherWorkspaceKey });
    expect(grpc).toMatchObject({
      code: 7,
      message: "the API key of x-api-key belongs to another workspace than the one x-workspace-id names",
      details: [{ "@type": "google.rpc.ErrorInfo", reason: "API_KEY_WORKSPACE_MISMATCH", domain: "compute" }],
    });
  });
});
