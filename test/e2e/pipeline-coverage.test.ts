import http2 from "node:http2";
import { getOption } from "@bufbuild/protobuf";
import type { DescMethod } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { method_policy } from "../../gen/cloudplane/api/v1/policy_pb.js";
import { http } from "../../gen/google/api/annotations_pb.js";
import type { Protocol } from "../../src/pipeline/call.js";
import type { Stage } from "../../src/pipeline/stage.js";
import { apiServices, infrastructureServices } from "../../src/routes.js";
import { adminAuth } from "../support/credentials.js";
import { frame } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// Generated from the descriptors of every served service: each method is called on every protocol it is mapped
// to, and a probe registered as a pipeline stage must see each of those calls with the right protocol, so that
// no surface can bypass the pipeline. The requests are empty messages: most are refused by the handler's
// validation, after the pipeline ran, which is all this test needs. They carry the admin's token, so that the
// access stages let them through to the probe, which runs last.

const seen = new Set<string>();
// The calls that reached the probe without a principal: only those of public methods may.
const seenAnonymous = new Set<string>();
const probe: Stage = (call, next) => {
  seen.add(`${call.entry.path} ${call.protocol}`);
  if (call.principal === "anonymous") seenAnonymous.add(`${call.entry.path} ${call.protocol}`);
  return next(call);
};

const contentTypes: Record<Exclude<Protocol, "rest" | "vcd">, string> = {
  grpc: "application/grpc",
  "grpc-web": "application/grpc-web+proto",
  connect: "application/proto",
};

function protocolsOf(method: DescMethod): Protocol[] {
  // gRPC-web has no client streams; Connect's unary and streaming calls differ only in their content type.
  const base: Protocol[] = method.methodKind === "bidi_streaming" || method.methodKind === "client_streaming" ? ["grpc", "connect"] : ["grpc", "grpc-web", "connect"];
  const mapped: Protocol[] = getOption(method, http).pattern.case === undefined ? base : [...base, "rest"];
  // The virtualization API's XML surface serves ServiceAuth too, as POST /api/sessions with Basic credentials, and
  // every method of VAppService.
  return method.name in vcdPaths ? [...mapped, "vcd"] : mapped;
}

// The virtualization API's request of each method it serves.
const vcdPaths: Record<string, () => { method: string; path: string; body?: string }> = {
  ServiceAuth: () => ({ method: "POST", path: "/api/sessions" }),
  ListVAppTemplates: () => ({ method: "GET", path: "/api/query?type=vAppTemplate" }),
  InstantiateVAppTemplate: () => ({
    method: "POST",
    path: "/api/vdc/1/action/instantiateVAppTemplate",
    body: '<InstantiateVAppTemplateParams xmlns="http://www.vmware.com/vcloud/v1.5" name="x"/>',
  }),
  GetVApp: () => ({ method: "GET", path: `/api/vApp/vapp-${vapp.id}` }),
  GetVAppTask: () => ({ method: "GET", path: `/api/task/${vapp.taskId}` }),
};

// Without the admin's token when `anonymous`.
async function vcdCall(url: string, method: DescMethod, anonymous = false): Promise<void> {
  const call = vcdPaths[method.name]!();
  const auth = method.name === "ServiceAuth" ? `Basic ${Buffer.from("nobody:wrong").toString("base64")}` : anonymous ? undefined : adminAuth(url).authorization;
  const res = await fetch(`${url}${call.path}`, {
    method: call.method,
    headers: { ...(auth === undefined ? {} : { authorization: auth }), accept: "application/*;version=38.0", "content-type": "application/vnd.vmware.vcloud.instantiateVAppTemplateParams+xml" },
    body: call.body,
  });
  await res.arrayBuffer();
}


// One call of an empty request over HTTP/2; a stream is let go once its response headers came.
function rawCall(url: string, method: DescMethod, protocol: Exclude<Protocol, "rest" | "vcd">, auth: Record<string, string> = adminAuth(url)): Promise<void> {
  const streaming = method.methodKind !== "unary";
  const contentType = protocol === "connect" && streaming ? "application/connect+proto" : contentTypes[protocol];
  const body = protocol === "connect" && !streaming ? Buffer.alloc(0) : frame(new Uint8Array(0));
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    const req = session.request({ ":method": "POST", ":path": `/${method.parent.typeName}/${method.name}`, "content-type": contentType, te: "trailers", ...auth });
    const done = (): void => {
      session.destroy();
      resolve();
    };
    req.on("response", () => (streaming ? setTimeout(done, 50) : undefined));
    req.on("data", () => {});
    req.on("end", done);
    req.on("error", reject);
    req.end(body);
  });
}

// A key and a vApp that exist, for the paths that name one: the access check answers an unknown key, vApp or
// task id itself, before the stages after it (the probe among them) see the call.
let keyId = "";
const vapp = { id: "", taskId: "" };
// The admin's API key of WORKSPACE, for the configuration calls.
let apiKey = "";
const WORKSPACE = "ws-coverage";

async function restCall(url: string, method: DescMethod, auth: Record<string, string> = adminAuth(url)): Promise<void> {
  const rule = getOption(method, http);
  const { pattern } = rule;
  if (pattern.case === undefined || pattern.case === "custom") throw new Error(`${method.name}: unexpected rule`);
  // "1" fits every other path variable (ids are strings or numbers), so the request reaches the pipeline.
  const path = pattern.value
    .replace(/\{key(_id|\.id)\}/g, keyId)
    .replace("{vapp_id}", vapp.id)
    .replace("{task_id}", vapp.taskId)
    .replace(/\{[^}]+\}/g, "1");
  const res = await fetch(url + path, {
    method: pattern.case.toUpperCase(),
    headers: { "content-type": "application/json", ...auth },
    body: rule.body === "" ? undefined : "{}",
  });
  await res.arrayBuffer();
}

describe("every call of every protocol runs through the pipeline", () => {
  let server: TestServer;
  const methods = [...apiServices, ...infrastructureServices].flatMap((s) => s.methods);

  beforeAll(async () => {
    server = await startServer({ stages: [probe] });
    apiKey = (await server.app.identity.createApiKey("admin", WORKSPACE)).text;
    const res = await fetch(`${server.url}/v1/keys`, {
      method: "POST",
      headers: { "content-type": "application/json", ...adminAuth(server.url) },
      body: JSON.stringify({ parentId: "coverage" }),
    });
    keyId = ((await res.json()) as { id: string }).id;
    const made = await fetch(`${server.url}/vapp/v1/vdcs/6f1c2a4e-3b7d-4e59-9a0c-8d2f1e3b5a71/vapps:instantiate`, {
      method: "POST",
      headers: { "content-type": "application/json", ...adminAuth(server.url) },
      body: JSON.stringify({ name: "coverage", source: "c2d4f6a8-1b3e-4d5f-8a7c-9e0b2d4f6a81", networkName: "org-net-default" }),
    });
    const created = (await made.json()) as { id: string; tasks: { id: string }[] };
    Object.assign(vapp, { id: created.id, taskId: created.tasks[0]!.id });
  });
  afterAll(() => server.stop());

  it.each(methods.map((m) => [`${m.parent.typeName}/${m.name}`, m] as const))("%s", async (_name, method) => {
    const protocols = protocolsOf(method);
    // The configuration calls refuse a caller without an API key before the probe sees them.
    const auth = getOption(method, method_policy).requiresApiKey ? { ...adminAuth(server.url), "x-api-key": apiKey, "x-workspace-id": WORKSPACE } : adminAuth(server.url);
    for (const protocol of protocols) {
      if (protocol === "rest") await restCall(server.url, method, auth);
      else if (protocol === "vcd") await vcdCall(server.url, method);
      else await rawCall(server.url, method, protocol, auth);
    }
    const path = `/${method.parent.typeName}/${method.name}`;
    expect(protocols.filter((p) => !seen.has(`${path} ${p}`))).toEqual([]);
  });

  it("covers the methods of the product on all four protocols", () => {
    const restMapped = methods.filter((m) => protocolsOf(m).includes("rest"));
    expect(restMapped.length).toBe(apiServices.flatMap((s) => s.methods).length);
  });
});

// Health, reflection and obtaining a token are open to every caller; every other method of every protocol is
// refused before its handler without credentials.
describe("no call of a method that needs credentials gets past authentication without them, on any protocol", () => {
  let server: TestServer;
  const methods = [...apiServices, ...infrastructureServices].flatMap((s) => s.methods);

  beforeAll(async () => {
    server = await startServer({ stages: [probe] });
    apiKey = (await server.app.identity.createApiKey("admin", WORKSPACE)).text;
  });
  afterAll(() => server.stop());

  it.each(methods.map((m) => [`${m.parent.typeName}/${m.name}`, m] as const))("%s", async (_name, method) => {
    const protocols = protocolsOf(method);
    for (const protocol of protocols) {
      if (protocol === "rest") await restCall(server.url, method, {});
      else if (protocol === "vcd") await vcdCall(server.url, method, true);
      else await rawCall(server.url, method, protocol, {});
    }
    const path = `/${method.parent.typeName}/${method.name}`;
    const reached = protocols.filter((p) => seenAnonymous.has(`${path} ${p}`));
    const open = infrastructureServices.includes(method.parent) || path === "/compute.auth.v2.AuthService/ServiceAuth";
    expect(reached).toEqual(open ? protocols : []);
  });
});
