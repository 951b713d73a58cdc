import { readFileSync } from "node:fs";
import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiServices } from "../../src/routes.js";
import { RouteTable } from "../../src/transport/rest/route-table.js";
import { methodTableOf } from "../support/method-table.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// Issue 13: the OpenAPI 3.1 document of the REST surface, generated from proto/ (npm run generate), is served at
// /openapi.json, is a valid OpenAPI 3.1 document for a maintained validator, names every REST route the server
// serves, and describes what the server really answers: each body of a scenario is checked against the schema of
// its operation.

interface Operation {
  operationId: string;
  parameters: { name: string; in: string }[];
  responses: Record<string, { $ref?: string; content?: { "application/json": { schema: object } } }>;
}
type Document = { openapi: string; paths: Record<string, Record<string, Operation>> };

const committed = readFileSync("openapi/openapi.json", "utf8");
const doc = JSON.parse(committed) as Document;
const SI = "6f1c2a4e-3b7d-4e59-9a0c-8d2f1e3b5a71";
const CL = "b3e8d0f2-7c41-4a95-8e26-0f9d3c1a7b54";

// Ajv over the document itself: each operation's schemas are found by JSON pointer, with their $refs into
// components resolved in the same document.
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats.default(ajv);
ajv.addSchema({ ...doc, $id: "https://cloudplane.local/openapi.json" });

function pointer(...parts: string[]): string {
  return parts.map((p) => encodeURIComponent(p.replace(/~/g, "~0").replace(/\//g, "~1"))).join("/");
}

// Checks a REST answer against the document: the operation of that path and verb, the schema of its answer
// (200, or the error response of the status).
function conforms(verb: string, path: string, status: number, body: unknown): void {
  const operation = doc.paths[path]?.[verb];
  expect(operation, `${verb.toUpperCase()} ${path} in the document`).toBeDefined();
  const response = status === 200 ? `${pointer("paths", path, verb, "responses", "200", "content", "application/json", "schema")}` : `${pointer("components", "schemas", "google.rpc.Status")}`;
  if (status !== 200) expect(operation!.responses[String(status)]?.$ref).toBe(`#/components/responses/Error${status}`);
  const validate = ajv.getSchema(`https://cloudplane.local/openapi.json#/${response}`);
  expect(validate, response).toBeDefined();
  const ok = validate!(body);
  expect(ok ? [] : validate!.errors, `${verb.toUpperCase()} ${path} ${status}: ${JSON.stringify(body)}`).toEqual([]);
}

describe("OpenAPI document", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(async () => {
    await server.stop();
  });

  it("is served at /openapi.json without credentials, exactly as committed", async () => {
    const res = await fetch(`${server.url}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.text()).toBe(committed);
  });

  it("is a valid OpenAPI 3.1 document (@seriousme/openapi-schema-validator)", async () => {
    const validator = new Validator();
    const result = await validator.validate(JSON.parse(committed) as Record<string, unknown>);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
    const operations = Object.values(doc.paths).reduce((n, ops) => n + Object.keys(ops).length, 0);
    console.log(`openapi: openapi/openapi.json is a valid OpenAPI ${validator.version} document: ${Object.keys(doc.paths).length} paths, ${operations} operations`);
  });

  it("has one operation for every REST route the server serves, with its path parameters", () => {
    const routes = new RouteTable(methodTableOf(apiServices)).routes;
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([verb, op]) => ({ path, verb, op })));
    expect(documented.length).toBe(routes.length);
    for (const route of routes) {
      const shape = route.template.source.replace(/\{[^}]*\}/g, "{}");
      const found = documented.find((d) => d.verb === route.httpMethod.toLowerCase() && d.path.replace(/\{[^}]*\}/g, "{}") === shape);
      expect(found, `${route.httpMethod} ${route.template.source}`).toBeDefined();
      expect(found!.op.operationId).toBe(`${route.method.parent.typeName}.${route.method.name}`);
      expect(found!.op.parameters.filter((p) => p.in === "path").length).toBe(route.template.variables.length);
    }
  });

  // A REQUIRED field bound as a query parameter is a required parameter: all were optional, and a client generated
  // from the document let callers leave out what the server then refused (a probe of the docs, 2026-11-28).
  it("declares the query parameters the server requires as required", async () => {
    const required = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops).flatMap(([verb, op]) => op.parameters.filter((p) => p.in === "query" && (p as { required?: boolean }).required === true).map((p) => `${verb} ${path} ${p.name}`)),
    );
    expect(required.sort()).toEqual(["get /cluster/v1/{serviceInstanceId}/node-pools clusterId", "get /public/v2/configs cluster_type", "get /v1/keys parentId"]);
    const withoutParent = await fetch(`${server.url}/v1/keys`, { headers: { authorization: `Bearer ${server.token}` } });
    expect(withoutParent.status).toBe(400);
    await withoutParent.arrayBuffer();
  });

  // A client generated from the document sends what it declares: the configuration calls' x-workspace-id was in
  // prose only, and such a client got 401 on every call (a probe, 2026-11-28).
  it("declares every header a call needs, from the methods' policies", () => {
    const routes = new RouteTable(methodTableOf(apiServices)).routes;
    const byId = new Map(Object.values(doc.paths).flatMap((ops) => Object.values(ops)).map((op) => [op.operationId, op]));
    let keyed = 0;
    for (const route of routes) {
      const op = byId.get(`${route.method.parent.typeName}.${route.method.name}`)!;
      const policy = route.entry.policy;
      const security = (op as Operation & { security: Record<string, string[]>[] }).security;
      const workspace = op.parameters.find((p) => p.in === "header" && p.name === "x-workspace-id") as { required?: boolean } | undefined;
      if (policy.requiresApiKey) {
        keyed++;
        expect({ id: op.operationId, security, workspace }).toEqual({ id: op.operationId, security: [{ bearer: [], apiKey: [] }], workspace: expect.objectContaining({ required: true }) });
      } else {
        expect({ id: op.operationId, workspace }).toEqual({ id: op.operationId, workspace: undefined });
      }
    }
    expect(keyed).toBe(2);
  });

  // X-RateLimit-* were in docs/rate-limits.md alone: a client generated from the document could not read them (a
  // note of 2026-11-28). Every header of cloudplane's own that an answer carries is one its response declares.
  it("declares the headers a rate-limited call answers with, on success and on error", async () => {
    type Declared = { headers?: Record<string, { $ref?: string }> };
    const components = (doc as unknown as { components: { responses: Record<string, Declared>; headers: Record<string, object> } }).components;
    const ours = (res: Response) => [...res.headers.keys()].filter((h) => h.startsWith("x-") || h === "retry-after").sort();
    const declared = (response: Declared) => {
      const names = Object.keys(response.headers ?? {});
      for (const name of names) {
        const ref = response.headers![name]!.$ref;
        if (ref !== undefined) expect(components.headers[ref.replace("#/components/headers/", "")], ref).toBeDefined();
      }
      return names.map((n) => n.toLowerCase());
    };
    const auth = { authorization: `Bearer ${server.token}` };
    const ok = await fetch(`${server.url}/cluster/v1/${SI}/node-pools?clusterId=${CL}`, { headers: auth });
    expect(ok.status).toBe(200);
    // The compute services are rate-limited by default.
    expect(ours(ok)).toEqual(["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "x-request-id"]);
    const listed = doc.paths["/cluster/v1/{serviceInstanceId}/node-pools"]!["get"]!.responses["200"] as Declared;
    expect(declared(listed)).toEqual(expect.arrayContaining(ours(ok)));
    const missing = await fetch(`${server.url}/cluster/v1/${SI}/node-pools/no-such-pool`, { headers: auth });
    expect(missing.status).toBe(404);
    expect(ours(missing)).toEqual(["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "x-request-id"]);
    expect(declared(components.responses["Error404"]!)).toEqual(expect.arrayContaining(ours(missing)));
    expect(declared(components.responses["Error429"]!)).toEqual(expect.arrayContaining(["retry-after", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "x-request-id"]));
  });

  it("describes what the server answers: every body of a scenario matches its operation's schema", async () => {
    const auth = { authorization: `Bearer ${server.token}`, "content-type": "application/json" };
    const call = async (verb: string, docPath: string, url: string, body?: object, headers: Record<string, string> = auth): Promise<{ status: number; json: Record<string, unknown> }> => {
      const res = await fetch(`${server.url}${url}`, { method: verb.toUpperCase(), headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const json = (await res.json()) as Record<string, unknown>;
      conforms(verb, docPath, res.status, json);
      return { status: res.status, json };
    };
    // The check can fail: a key whose id is a number, or with a field the schema does not have.
    const keySchema = ajv.getSchema(`https://cloudplane.local/openapi.json#/${pointer("components", "schemas", "kms.v1.CryptoKey")}`)!;
    expect(keySchema({ id: 5 })).toBe(false);
    expect(keySchema({ id: "k", colour: "red" })).toBe(false);
    expect(keySchema({ id: "k", primary: { id: 1, state: "ENABLED" } })).toBe(true);
    const credentials = JSON.parse(readFileSync(`${server.dataDir}/admin-credentials.json`, "utf8")) as object;
    await call("post", "/public/v2/service_auth", "/public/v2/service_auth", credentials, { "content-type": "application/json" });
    const key = (await call("post", "/v1/keys", "/v1/keys", { parentId: "openapi", name: "doc", labels: ["a"], rotationPeriod: "86400s" })).json;
    const keyId = key["id"] as string;
    await call("get", "/v1/keys/{keyId}", `/v1/keys/${keyId}`);
    await call("patch", "/v1/keys/{keyId}", `/v1/keys/${keyId}`, { key: { description: "d" }, updateMask: "description" });
    await call("post", "/v1/keys/{keyId}/versions", `/v1/keys/${keyId}/versions`, {});
    await call("get", "/v1/keys/{keyId}/versions", `/v1/keys/${keyId}/versions`);
    await call("post", "/v1/keys/{keyId}/versions/{keyVersionId}/disable", `/v1/keys/${keyId}/versions/2/disable`, {});
    await call("get", "/v1/keys", "/v1/keys?parentId=openapi&page.limit=5");
    const sealed = (await call("post", "/v1/encrypt", "/v1/encrypt", { keyId, keyVersionId: 1, plaintext: "aGVsbG8=" })).json;
    await call("post", "/v1/decrypt", "/v1/decrypt", { keyId, ciphertext: sealed["ciphertext"] });
    // Errors: a bad field (400 with BadRequest), an unknown key (404), no credentials (401), a state conflict (400).
    expect((await call("post", "/v1/encrypt", "/v1/encrypt", { keyId, keyVersionId: 0, plaintext: "" })).status).toBe(400);
    expect((await call("get", "/v1/keys/{keyId}", "/v1/keys/nope")).status).toBe(404);
    expect((await call("get", "/v1/keys/{keyId}", `/v1/keys/${keyId}`, undefined, {})).status).toBe(401);
    expect((await call("post", "/v1/keys/{keyId}/versions/{keyVersionId}/disable", `/v1/keys/${keyId}/versions/1/disable`, {})).status).toBe(400);
    // A node pool and its task, whose response is a google.protobuf.Any as {"typeUrl", "value"}.
    const created = await call("post", "/cluster/v1/{serviceInstanceId}/node-pools", `/cluster/v1/${SI}/node-pools`, {
      clusterId: CL,
      nodePoolName: "openapi-pool",
      nodeConfig: { computeFlavor: "cpu.4C.16G" },
      scalePolicy: { fixedScale: { count: 1 } },
    });
    const taskId = (created.json["task"] as { id: string }).id;
    const done = await call("post", "/cluster/v1/{serviceInstanceId}/tasks/{taskId}:wait", `/cluster/v1/${SI}/tasks/${taskId}:wait`, { timeout: "30s" });
    expect((done.json["task"] as { response: { typeUrl: string } }).response.typeUrl).toBe("type.googleapis.com/compute.cluster.v1.NodePool");
    await call("get", "/cluster/v1/{serviceInstanceId}/tasks", `/cluster/v1/${SI}/tasks`);
    await call("get", "/cluster/v1/{serviceInstanceId}/node-pools", `/cluster/v1/${SI}/node-pools?clusterId=${CL}`);
  });
});
