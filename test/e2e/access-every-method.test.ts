import { getOption, hasOption } from "@bufbuild/protobuf";
import type { DescMethod, JsonObject } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { method_policy, service_policy } from "../../gen/cloudplane/api/v1/policy_pb.js";
import { http } from "../../gen/google/api/annotations_pb.js";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { apiServices, infrastructureServices } from "../../src/routes.js";
import { auditRecords, makePrincipal, resourceSnapshot } from "../support/principals.js";
import type { Principal } from "../support/principals.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { httpStatusOfCode, wireCall, wireProtocolsOf } from "../support/wire-call.js";
import type { WireAnswer, WireProtocol } from "../support/wire-call.js";
import { OTHER_VDC, VDC, writeTestCatalog } from "./compute-helpers.js";
import { buildMethodWorld, nameOf } from "./every-method-world.js";
import type { MethodWorld } from "./every-method-world.js";

// Generated from the descriptors of every served service (issue 9, "Must show"): every method, on every protocol
// it is mapped to, called with a request that names real resources,
// - with no credentials answers UNAUTHENTICATED (HTTP 401 where the protocol has statuses), except the public
//   methods, which answer as they do for anyone;
// - with the token of a viewer of the scope, every method that is not a read answers PERMISSION_DENIED (403),
//   whether or not the viewer may do that elsewhere; every read succeeds;
// and leaves every key, version, node pool and task as it was. Nothing here is listed by hand but the values
// of the request fields and the one POST method that only reads (WaitTask).

const NS = "access-ns";
const OTHER_NS = "access-other-ns";

const methods = [...apiServices, ...infrastructureServices].flatMap((s) => s.methods);

// Public: declared so in the method policy, or one of gRPC's own services (health, reflection), which the server
// opens to everyone (src/pipeline/method-policy.ts).
function isPublic(m: DescMethod): boolean {
  if (infrastructureServices.includes(m.parent)) return true;
  return hasOption(m, method_policy) && getOption(m, method_policy).public;
}

function domainOf(m: DescMethod): string {
  return getOption(m.parent, service_policy).errorDomain;
}

function verbOf(m: DescMethod): string | undefined {
  return getOption(m, http).pattern.case;
}

// The methods a REST caller would call a mutation: mapped to another verb than GET. WaitTask is a POST that only
// waits for a task to finish (its permission is compute.tasks.get), which a viewer may do.
const READ_ONLY_POSTS = ["compute.cluster.v1.TaskService/WaitTask"];
const protectedMethods = methods.filter((m) => !isPublic(m));
const mutations = protectedMethods.filter((m) => verbOf(m) !== "get" && !READ_ONLY_POSTS.includes(nameOf(m)));
const reads = protectedMethods.filter((m) => !mutations.includes(m));

let server: TestServer;
let catalogDir: ReturnType<typeof tempDir>;
let viewer: Principal;
// The configuration calls (requires_api_key) take the viewer's API key of WORKSPACE besides its token.
let viewerApiKey = "";
const WORKSPACE = "ws-every";
// A viewer of the scope that may change things elsewhere: its refusals come from the scope's check, not from the
// shortcut for a permission the principal has nowhere.
let viewerEditorElsewhere: Principal;
let world: MethodWorld;

function refusal(protocol: WireProtocol, code: number, message: string, detail: JsonObject): Omit<WireAnswer, "headers"> {
  return {
    http: protocol === "grpc" || protocol === "grpc-web" ? 200 : httpStatusOfCode(code),
    code,
    message,
    details: [{ "@type": "google.rpc.ErrorInfo", ...detail }],
  };
}

function withoutHeaders(answer: WireAnswer): Omit<WireAnswer, "headers"> {
  const { headers: _headers, ...rest } = answer;
  return rest;
}

beforeAll(async () => {
  catalogDir = tempDir();
  server = await startServer({ env: { CATALOG_FILE: writeTestCatalog(catalogDir.path) } });
  world = await buildMethodWorld(server, NS);
  viewer = await makePrincipal(server, "viewer", [
    ["viewer", `kms-namespace:${NS}`],
    ["viewer", `service-instance:${VDC}`],
    ["viewer", `workspace:${WORKSPACE}`],
  ]);
  viewerApiKey = (await server.app.identity.createApiKey("viewer", WORKSPACE)).text;
  viewerEditorElsewhere = await makePrincipal(server, "viewer-editor-elsewhere", [
    ["viewer", `kms-namespace:${NS}`],
    ["viewer", `service-instance:${VDC}`],
    ["editor", `kms-namespace:${OTHER_NS}`],
    ["editor", `service-instance:${OTHER_VDC}`],
  ]);
});

afterAll(async () => {
  await server?.stop();
  catalogDir?.remove();
});

describe("the methods, from the descriptors", () => {
  it("are mapped to every protocol, the public ones are exactly ServiceAuth, health and reflection, and the store holds what the requests name", () => {
    expect(methods.length).toBeGreaterThan(25);
    expect(methods.filter(isPublic).map(nameOf)).toEqual([
      "compute.auth.v2.AuthService/ServiceAuth",
      "grpc.health.v1.Health/Check",
      "grpc.health.v1.Health/Watch",
      "grpc.health.v1.Health/List",
      "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
      "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    ]);
    // Every product method has a REST mapping, so is called on all five protocols below.
    for (const m of apiServices.flatMap((s) => s.methods)) expect(wireProtocolsOf(m)).toContain("rest");
    // The snapshots compared below hold the resources the requests name.
    const snapshot = resourceSnapshot(server.dataDir);
    for (const table of ["kms_keys", "kms_versions", "compute_node_pools", "compute_tasks", "vapps", "vapp_tasks"]) expect(snapshot[table]?.length, table).toBeGreaterThan(0);
    expect(READ_ONLY_POSTS.every((name) => protectedMethods.some((m) => nameOf(m) === name && verbOf(m) === "post"))).toBe(true);
  });
});

describe("with no credentials", () => {
  it.each(protectedMethods.map((m) => [nameOf(m), m] as const))("%s answers UNAUTHENTICATED on every protocol", async (_name, m) => {
    for (const protocol of wireProtocolsOf(m)) {
      const before = resourceSnapshot(server.dataDir);
      const answer = await wireCall(server.url, protocol, m, world.requestFor(m));
      expect({ protocol, ...withoutHeaders(answer) }).toEqual({
        protocol,
        ...refusal(protocol, 16, "the call carries no credentials: send Authorization: Bearer <token>, a token from POST /public/v2/service_auth", {
          reason: "UNAUTHENTICATED",
          domain: domainOf(m),
        }),
      });
      expect(resourceSnapshot(server.dataDir)).toEqual(before);
    }
  });

  it("is not recorded in the audit trail, so that nobody can fill it without credentials", () => {
    expect(auditRecords(server.dataDir).filter((r) => r.principal === "anonymous")).toEqual([]);
  });

  it.each(methods.filter(isPublic).map((m) => [nameOf(m), m] as const))("public %s answers as it does for anyone", async (name, m) => {
    for (const protocol of wireProtocolsOf(m)) {
      const before = resourceSnapshot(server.dataDir);
      const answer = await wireCall(server.url, protocol, m, world.requestFor(m));
      if (name === "compute.auth.v2.AuthService/ServiceAuth") {
        // An empty request: refused for what is missing, not for the missing credentials.
        expect({ protocol, ...withoutHeaders(answer) }).toEqual({
          protocol,
          http: protocol === "grpc" || protocol === "grpc-web" ? 200 : 400,
          code: 3,
          message: "client_id: client_id is required; client_secret: client_secret is required",
          details: [
            { "@type": "google.rpc.ErrorInfo", reason: "REQUEST_INVALID", domain: "compute" },
            {
              "@type": "google.rpc.BadRequest",
              fieldViolations: [
                { field: "client_id", description: "client_id is required" },
                { field: "client_secret", description: "client_secret is required" },
              ],
            },
          ],
        });
      } else {
        expect({ protocol, code: answer.code, message: answer.message }).toEqual({ protocol, code: 0, message: "" });
        expect(answer.response).toBeDefined();
      }
      expect(resourceSnapshot(server.dataDir)).toEqual(before);
    }
  });
});

describe("with the token of a viewer of the scope", () => {
  it.each(mutations.map((m) => [nameOf(m), m] as const))("%s answers PERMISSION_DENIED on every protocol and changes nothing", async (name, m) => {
    const permission = getOption(m, method_policy).permission;
    for (const protocol of wireProtocolsOf(m)) {
      const before = resourceSnapshot(server.dataDir);
      const trail = auditRecords(server.dataDir).length;
      const answer = await wireCall(server.url, protocol, m, world.requestFor(m), viewer.auth);
      // A viewer may do this nowhere: refused before the scope is even looked up.
      expect({ protocol, ...withoutHeaders(answer) }).toEqual({
        protocol,
        ...refusal(protocol, 7, `principal ${viewer.id} lacks permission ${permission} on any scope`, {
          reason: "PERMISSION_DENIED",
          domain: domainOf(m),
          metadata: { permission, scope: "" },
        }),
      });
      const scope = m.parent === KeyManagerService ? `kms-namespace:${NS}` : `service-instance:${VDC}`;
      const again = await wireCall(server.url, protocol, m, world.requestFor(m), viewerEditorElsewhere.auth);
      expect({ protocol, ...withoutHeaders(again) }).toEqual({
        protocol,
        ...refusal(protocol, 7, `principal ${viewerEditorElsewhere.id} lacks permission ${permission} on ${scope}`, {
          reason: "PERMISSION_DENIED",
          domain: domainOf(m),
          metadata: { permission, scope },
        }),
      });
      expect(resourceSnapshot(server.dataDir)).toEqual(before);
      // Both refusals are recorded, with who was refused and where.
      const added = auditRecords(server.dataDir).slice(trail);
      expect(added.map((r) => ({ principal: r.principal, method: r.method, scope: r.scope, code: r.code }))).toEqual([
        { principal: viewer.id, method: name, scope: "", code: 7 },
        { principal: viewerEditorElsewhere.id, method: name, scope, code: 7 },
      ]);
    }
  });

  it.each(reads.map((m) => [nameOf(m), m] as const))("%s, a read, succeeds on every protocol and changes nothing", async (_name, m) => {
    for (const protocol of wireProtocolsOf(m)) {
      const before = resourceSnapshot(server.dataDir);
      const apiKey: Record<string, string> = getOption(m, method_policy).requiresApiKey ? { "x-api-key": viewerApiKey, "x-workspace-id": WORKSPACE } : {};
      const answer = await wireCall(server.url, protocol, m, world.requestFor(m), { ...viewer.auth, ...apiKey });
      expect({ protocol, code: answer.code, message: answer.message }).toEqual({ protocol, code: 0, message: "" });
      expect(resourceSnapshot(server.dataDir)).toEqual(before);
    }
  });
});
