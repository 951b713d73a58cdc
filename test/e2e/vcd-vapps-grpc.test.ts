import http from "node:http";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rawRequest } from "../support/raw-http1.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { MOSCOW, UBUNTU, attr, instantiate, instantiateParams, site, templateHref, vcd } from "./vcd-helpers.js";

// One domain behind two surfaces: VAppService over gRPC (@grpc/grpc-js and the .proto files, as any gRPC client)
// and the virtualization API's XML return the same templates and the same vApps.

const definition = protoLoader.loadSync("compute/vapp/v1/vapp.proto", { includeDirs: ["proto"], enums: String, longs: String, defaults: true });
const loaded = grpc.loadPackageDefinition(definition) as unknown as {
  compute: { vapp: { v1: { VAppService: grpc.ServiceClientConstructor } } };
};

type Unary = (request: object, metadata: grpc.Metadata, callback: (err: grpc.ServiceError | null, response: Record<string, unknown>) => void) => void;

let server: TestServer;
let client: grpc.Client & Record<string, Unary>;

function call(method: string, request: object): Promise<Record<string, unknown>> {
  const metadata = new grpc.Metadata();
  metadata.set("authorization", `Bearer ${server.token}`);
  return new Promise((resolve, reject) => {
    client[method]!(request, metadata, (err, response) => (err === null ? resolve(response) : reject(err)));
  });
}

beforeAll(async () => {
  server = await startServer();
  client = new loaded.compute.vapp.v1.VAppService(new URL(server.url).host, grpc.credentials.createInsecure()) as grpc.Client & Record<string, Unary>;
});
afterAll(async () => {
  client.close();
  await server.stop();
});

describe("VAppService over gRPC and the XML surface", () => {
  it("list the same templates, page by page, with the same hrefs", async () => {
    for (const page of [1, 2, 3]) {
      const xml = await vcd(server.url, `/api/query?type=vAppTemplate&pageSize=1&page=${page}&filter=${encodeURIComponent("status==resolved")}`, { token: server.token });
      const records = ((xml.doc.QueryResultRecords as Record<string, unknown>).VAppTemplateRecord as Record<string, string>[]).map((r) => ({
        name: r["@_name"],
        href: r["@_href"],
        id: r["@_id"]!.replace("urn:vcloud:vapptemplate:", ""),
        catalogName: r["@_catalogName"],
        vdc: r["@_vdc"],
        vdcName: r["@_vdcName"],
        isGoldMaster: r["@_isGoldMaster"] === "true",
        storageProfileName: r["@_storageProfileName"],
      }));
      const listed = await call("ListVAppTemplates", { page, pageSize: 1, filter: "status==resolved" });
      expect({ page: listed.page, pageSize: listed.pageSize, total: listed.total }).toEqual({ page, pageSize: 1, total: 3 });
      const templates = (listed.templates as Record<string, unknown>[]).map((t) => ({
        name: t.name,
        href: t.href,
        id: t.id,
        catalogName: t.catalogName,
        vdc: `${site(server.url)}/api/vdc/${String(t.serviceInstanceId)}`,
        vdcName: t.vdcName,
        isGoldMaster: t.isGoldMaster,
        storageProfileName: t.storageProfileName,
      }));
      expect(templates).toEqual(records);
    }
  });

  it("see the same vApp, whichever surface created it", async () => {
    // Made over XML, read over gRPC.
    const made = await instantiate(server.url, server.token, MOSCOW, instantiateParams({ name: "from-xml", powerOn: true, source: templateHref(server.url, UBUNTU) }));
    expect(made.status).toBe(201);
    const xmlId = attr(made.doc.VApp, "id")!.replace("urn:vcloud:vapp:", "");
    const seen = await call("GetVApp", { vappId: xmlId });
    expect(seen).toMatchObject({ id: xmlId, name: "from-xml", serviceInstanceId: MOSCOW, templateId: UBUNTU, networkName: "org-net-default", createdBy: server.adminId });
    // Made over gRPC with the template's href, read over XML once its task is done.
    const vapp = await call("InstantiateVAppTemplate", {
      serviceInstanceId: MOSCOW,
      name: "from-grpc",
      source: templateHref(server.url, UBUNTU),
      networkName: "org-net-isolated",
      deploy: true,
    });
    expect(vapp).toMatchObject({ name: "from-grpc", status: 0, deployed: false });
    const task = (vapp.tasks as Record<string, unknown>[])[0]!;
    expect(task).toMatchObject({ status: "RUNNING", operation: `Creating Virtual Application from-grpc(${String(vapp.id)})`, operationName: "vdcInstantiateVapp" });
    await expect.poll(async () => (await call("GetVAppTask", { taskId: task.id })).status, { timeout: 5000 }).toBe("SUCCESS");
    const xml = await vcd(server.url, `/api/vApp/vapp-${String(vapp.id)}`, { token: server.token });
    expect(xml.doc.VApp).toMatchObject({ "@_name": "from-grpc", "@_status": "8", "@_deployed": "true" });
    expect(xml.text).toContain('<NetworkConfig networkName="org-net-isolated"/>');
    const again = await call("GetVApp", { vappId: vapp.id });
    expect(again).toMatchObject({ status: 8, deployed: true, tasks: [] });
  });

  // REST writes and reads hrefs on the host the caller named, on both call paths: through Connect in-process
  // (CALL_PATH=connect) they named "https://in-process/..." and refused the caller's own template href (a probe,
  // 2026-11-28).
  it("over REST, on the host the caller named", async () => {
    const port = new URL(server.url).port;
    const rest = (method: string, path: string, host: string, body?: object): Promise<{ status: number; json: Record<string, unknown> }> =>
      new Promise((resolve, reject) => {
        const headers: http.OutgoingHttpHeaders = { host, authorization: `Bearer ${server.token}`, "content-type": "application/json" };
        const req = http.request({ host: "127.0.0.1", port, method, path, headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown> }));
        });
        req.on("error", reject);
        req.end(body === undefined ? undefined : JSON.stringify(body));
      });
    const host = "api.example.test:8443";
    const listed = await rest("GET", "/vapp/v1/vappTemplates?pageSize=3", host);
    expect(listed.status).toBe(200);
    const hrefs = (listed.json.templates as { href: string }[]).map((t) => t.href);
    expect(hrefs).toHaveLength(3);
    for (const href of hrefs) expect(href).toMatch(/^https:\/\/api\.example\.test:8443\/api\/vAppTemplate\/vappTemplate-/);
    const source = templateHref(`http://${host}`, UBUNTU);
    expect(hrefs).toContain(source);
    const made = await rest("POST", `/vapp/v1/vdcs/${MOSCOW}/vapps:instantiate`, host, { name: "from-rest", source, networkName: "org-net-default", allEulasAccepted: true });
    expect([made.status, made.json.name, made.json.templateId]).toEqual([200, "from-rest", UBUNTU]);
    // As written, not as a URL would normalise it: the scheme's default port kept, a port past 65535 served as the
    // direct path serves it (it was an unlogged 500 through Connect), upper case kept.
    for (const other of ["a.test:80", "x:99999", "API.Example.TEST"]) {
      const page = await rest("GET", "/vapp/v1/vappTemplates?pageSize=1", other);
      expect([other, page.status, (page.json.templates as { href: string }[])[0]?.href.split("/api/")[0]]).toEqual([other, 200, `https://${other}`]);
    }
    const port80 = templateHref("http://a.test:80", UBUNTU).replace("https://a.test", "https://a.test:80");
    const again = await rest("POST", `/vapp/v1/vdcs/${MOSCOW}/vapps:instantiate`, "a.test:80", { name: "port-80", source: port80, networkName: "org-net-default", allEulasAccepted: true });
    expect([again.status, again.json.name]).toEqual([200, "port-80"]);
    // No Host at all (HTTP/1.0): "localhost", as on the direct path; an empty one is refused.
    const none = await rawRequest(Number(port), `GET /vapp/v1/vappTemplates?pageSize=1 HTTP/1.0\r\nAuthorization: Bearer ${server.token}\r\n\r\n`);
    expect((JSON.parse(none.body) as { templates: { href: string }[] }).templates[0]?.href).toMatch(/^https:\/\/localhost\/api\//);
    const empty = await rawRequest(Number(port), `GET /vapp/v1/vappTemplates?pageSize=1 HTTP/1.1\r\nHost: \r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n`);
    expect([empty.status, (JSON.parse(empty.body) as { message: string }).message]).toEqual([400, expect.stringContaining("the Host header is empty")]);
  });
});
