import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
});
