import http from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer } from "../support/server.js";
import { auditRecords } from "../support/store-snapshot.js";
import type { TestServer } from "../support/server.js";
import { ACCEPT, CENTOS, DEBIAN, MOSCOW, SPB, UBUNTU, attr, instantiate, instantiateParams, site, templateHref, vcd } from "./vcd-helpers.js";
import type { XmlResponse } from "./vcd-helpers.js";

// The virtualization API's vApp creation as a VCD client does it (CONTRACT section 7, seed "vApp creation"): list
// the templates, instantiate one in a vDC, follow the task to success, read the vApp.

let server: TestServer;

beforeAll(async () => {
  // A stage of the pipeline that adds a response header, as a rate limiter would: the XML answers carry it.
  server = await startServer({
    stages: [
      (call, next) => {
        call.addResponseHeader("x-stage", "seen");
        return next(call);
      },
    ],
  });
});
afterAll(() => server.stop());

const recordsType = "application/vnd.vmware.vcloud.query.records+xml";

function records(res: XmlResponse): Record<string, string>[] {
  const root = res.doc.QueryResultRecords as Record<string, unknown>;
  return (root.VAppTemplateRecord as Record<string, string>[] | undefined) ?? [];
}

function links(res: XmlResponse): Record<string, string> {
  const root = res.doc.QueryResultRecords as Record<string, unknown>;
  const list = (root.Link as Record<string, string>[] | undefined) ?? [];
  return Object.fromEntries(list.map((l) => [l["@_rel"]!, l["@_href"]!]));
}

async function waitForTask(taskHref: string): Promise<XmlResponse> {
  const path = new URL(taskHref).pathname;
  for (let i = 0; i < 200; i++) {
    const task = await vcd(server.url, path, { token: server.token });
    const status = attr((task.doc.Task as unknown[])[0], "status");
    if (status === "success" || status === "error") return task;
    await sleep(25);
  }
  throw new Error(`task ${taskHref} did not finish`);
}

describe("GET /api/query?type=vAppTemplate", () => {
  it("lists every template of the catalog as records, sorted by name, with hrefs on the request's host", async () => {
    const res = await vcd(server.url, "/api/query?type=vAppTemplate&format=records", { token: server.token });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe(`${recordsType};version=38.0`);
    const base = site(server.url);
    expect(res.text).toBe(
      `<?xml version="1.0" encoding="UTF-8"?>\n` +
        `<QueryResultRecords xmlns="http://www.vmware.com/vcloud/v1.5" name="vAppTemplate" page="1" pageSize="25" total="3" href="${base}/api/query?type=vAppTemplate&amp;format=records" type="${recordsType}">` +
        `<VAppTemplateRecord name="centos-stream-9" href="${base}/api/vAppTemplate/vappTemplate-${CENTOS}" id="urn:vcloud:vapptemplate:${CENTOS}" catalogName="public-templates" vdc="${base}/api/vdc/${MOSCOW}" vdcName="vdc-moscow-1" ownerName="system" status="RESOLVED" isDeployed="false" isGoldMaster="false" isEnabled="true" storageProfileName="hdd"/>` +
        `<VAppTemplateRecord name="debian-12" href="${base}/api/vAppTemplate/vappTemplate-${DEBIAN}" id="urn:vcloud:vapptemplate:${DEBIAN}" catalogName="public-templates" vdc="${base}/api/vdc/${SPB}" vdcName="vdc-spb-1" ownerName="system" status="RESOLVED" isDeployed="false" isGoldMaster="true" isEnabled="true" storageProfileName="ssd"/>` +
        `<VAppTemplateRecord name="ubuntu-22.04-cuda-12" href="${base}/api/vAppTemplate/vappTemplate-${UBUNTU}" id="urn:vcloud:vapptemplate:${UBUNTU}" catalogName="public-templates" vdc="${base}/api/vdc/${MOSCOW}" vdcName="vdc-moscow-1" ownerName="system" status="RESOLVED" isDeployed="false" isGoldMaster="true" isEnabled="true" storageProfileName="ssd"/>` +
        `</QueryResultRecords>`,
    );
  });

  it("uses the Host the caller sent in every href", async () => {
    // fetch does not let a caller set Host; node:http does.
    const text = await new Promise<string>((resolve, reject) => {
      const req = http.get(`${server.url}/api/query?type=vAppTemplate&pageSize=1`, { headers: { authorization: `Bearer ${server.token}`, accept: ACCEPT, host: "vcd.example.test" } }, (res) => {
        let body = "";
        res.on("data", (chunk: Buffer) => (body += chunk.toString()));
        res.on("end", () => resolve(body));
      });
      req.on("error", reject);
    });
    expect(text).toContain('href="https://vcd.example.test/api/query?type=vAppTemplate&amp;pageSize=1"');
    expect(text).toContain('<Link rel="nextPage" href="https://vcd.example.test/api/query?type=vAppTemplate&amp;pageSize=1&amp;page=2"');
    expect(text).toContain(`href="https://vcd.example.test/api/vAppTemplate/vappTemplate-${CENTOS}"`);
  });

  it("filters with == (case-insensitive, * wildcard), != and ; for and", async () => {
    const query = async (filter: string): Promise<string[]> => {
      const res = await vcd(server.url, `/api/query?type=vAppTemplate&filter=${encodeURIComponent(filter)}`, { token: server.token });
      expect(res.status).toBe(200);
      return records(res).map((r) => r["@_name"]!);
    };
    expect(await query("name==UBUNTU*")).toEqual(["ubuntu-22.04-cuda-12"]);
    expect(await query("name==*e*")).toEqual(["centos-stream-9", "debian-12"]);
    expect(await query("isGoldMaster==true;vdcName!=vdc-spb-1")).toEqual(["ubuntu-22.04-cuda-12"]);
    expect(await query(`vdc==${site(server.url)}/api/vdc/${SPB}`)).toEqual(["debian-12"]);
    expect(await query("name!=*")).toEqual([]);
  });

  it("sorts with sortAsc and sortDesc", async () => {
    const res = await vcd(server.url, "/api/query?type=vAppTemplate&sortDesc=storageProfileName", { token: server.token });
    expect(records(res).map((r) => r["@_storageProfileName"])).toEqual(["ssd", "ssd", "hdd"]);
    const asc = await vcd(server.url, "/api/query?type=vAppTemplate&sortAsc=vdcName", { token: server.token });
    expect(records(asc).map((r) => r["@_vdcName"])).toEqual(["vdc-moscow-1", "vdc-moscow-1", "vdc-spb-1"]);
  });

  it("pages with page and pageSize, and links the next, previous, first and last pages", async () => {
    const base = `${site(server.url)}/api/query?type=vAppTemplate&pageSize=1`;
    const first = await vcd(server.url, "/api/query?type=vAppTemplate&pageSize=1", { token: server.token });
    expect(records(first).map((r) => r["@_name"])).toEqual(["centos-stream-9"]);
    expect(links(first)).toEqual({ nextPage: `${base}&page=2`, lastPage: `${base}&page=3` });
    const middle = await vcd(server.url, "/api/query?type=vAppTemplate&pageSize=1&page=2", { token: server.token });
    const root = middle.doc.QueryResultRecords as Record<string, string>;
    expect([root["@_page"], root["@_pageSize"], root["@_total"]]).toEqual(["2", "1", "3"]);
    expect(records(middle).map((r) => r["@_name"])).toEqual(["debian-12"]);
    expect(links(middle)).toEqual({ nextPage: `${base}&page=3`, previousPage: `${base}&page=1`, firstPage: `${base}&page=1`, lastPage: `${base}&page=3` });
    const last = await vcd(server.url, "/api/query?type=vAppTemplate&pageSize=1&page=3", { token: server.token });
    expect(records(last).map((r) => r["@_name"])).toEqual(["ubuntu-22.04-cuda-12"]);
    expect(links(last)).toEqual({ previousPage: `${base}&page=2`, firstPage: `${base}&page=1` });
  });
});

describe("POST /api/vdc/<id>/action/instantiateVAppTemplate", () => {
  it("answers 201 with Location and the vApp in status 0 holding its running task, which ends in success with the vApp powered off", async () => {
    const body = instantiateParams({ name: "web-off", description: "front end", source: templateHref(server.url, UBUNTU) });
    const res = await instantiate(server.url, server.token, MOSCOW, body);
    expect(res.status).toBe(201);
    expect(res.headers.get("content-type")).toBe("application/vnd.vmware.vcloud.vApp+xml;version=38.0");
    const vapp = res.doc.VApp as Record<string, unknown>;
    const id = attr(vapp, "id")!.replace("urn:vcloud:vapp:", "");
    const href = `${site(server.url)}/api/vApp/vapp-${id}`;
    expect(res.headers.get("location")).toBe(href);
    expect(vapp).toMatchObject({ "@_status": "0", "@_deployed": "false", "@_name": "web-off", "@_href": href, "@_type": "application/vnd.vmware.vcloud.vApp+xml" });
    expect(vapp.Link).toEqual([{ "@_rel": "up", "@_href": `${site(server.url)}/api/vdc/${MOSCOW}`, "@_type": "application/vnd.vmware.vcloud.vdc+xml" }]);
    expect(vapp.Description).toBe("front end");
    // Children in the schema's order: Link, Description, Tasks, sections, DateCreated, Owner, InMaintenanceMode.
    expect(res.text.indexOf("<Link")).toBeLessThan(res.text.indexOf("<Description>"));
    expect(res.text.indexOf("<Description>")).toBeLessThan(res.text.indexOf("<Tasks>"));
    expect(res.text.indexOf("<Tasks>")).toBeLessThan(res.text.indexOf("<NetworkConfigSection>"));
    expect(res.text.indexOf("<NetworkConfigSection>")).toBeLessThan(res.text.indexOf("<DateCreated>"));
    const task = ((vapp.Tasks as Record<string, unknown>).Task as Record<string, string>[])[0]!;
    const taskId = task["@_id"]!.replace("urn:vcloud:task:", "");
    expect(task).toMatchObject({
      "@_status": "running",
      "@_operation": `Creating Virtual Application web-off(${id})`,
      "@_operationName": "vdcInstantiateVapp",
      "@_href": `${site(server.url)}/api/task/${taskId}`,
      "@_type": "application/vnd.vmware.vcloud.task+xml",
    });

    const done = await waitForTask(task["@_href"]!);
    expect(done.headers.get("content-type")).toBe("application/vnd.vmware.vcloud.task+xml;version=38.0");
    const finished = (done.doc.Task as Record<string, unknown>[])[0]!;
    expect(finished).toMatchObject({ "@_status": "success", Progress: "100", Owner: { "@_href": href, "@_name": "web-off" } });
    expect(finished["@_endTime"]).toMatch(/^\d{4}-\d\d-\d\dT/);

    const read = await vcd(server.url, `/api/vApp/vapp-${id}`, { token: server.token });
    expect(read.status).toBe(200);
    expect(read.headers.get("content-type")).toBe("application/vnd.vmware.vcloud.vApp+xml;version=38.0");
    expect(read.doc.VApp).toMatchObject({ "@_status": "8", "@_deployed": "false", "@_name": "web-off" });
    expect((read.doc.VApp as Record<string, unknown>).Tasks).toBeUndefined();
    expect(read.text).toContain('<NetworkConfig networkName="org-net-default"/>');

    // The pipeline's audit stage recorded the creation, as it does on every protocol.
    const record = auditRecords(server.dataDir).find((r) => r.method === "compute.vapp.v1.VAppService/InstantiateVAppTemplate" && r.protocol === "vcd");
    expect(record).toMatchObject({ principal: server.adminId, scope: `service-instance:${MOSCOW}`, resource: `/vapp/v1/vdcs/${MOSCOW}/vapps:instantiate`, code: 0 });
    expect(record!.request_id).toBe(res.headers.get("x-request-id"));
  });

  it("powers the vApp on (status 4, deployed) when powerOn is true, and takes a template with EULAs once they are accepted", async () => {
    const body = instantiateParams({ name: "web-on", deploy: true, powerOn: true, source: templateHref(server.url, CENTOS), eula: true });
    const res = await instantiate(server.url, server.token, MOSCOW, body);
    expect(res.status).toBe(201);
    const task = (((res.doc.VApp as Record<string, unknown>).Tasks as Record<string, unknown>).Task as Record<string, string>[])[0]!;
    await waitForTask(task["@_href"]!);
    const read = await vcd(server.url, new URL(res.headers.get("location")!).pathname, { token: server.token });
    expect(read.doc.VApp).toMatchObject({ "@_status": "4", "@_deployed": "true" });
  });

  it("deploys and powers on when deploy and powerOn are absent, their default in VCD's schema", async () => {
    // [deploy, powerOn] as written (null: left out) and the vApp's status and deployed once built.
    const cases: [boolean | null, boolean | null, string, string][] = [
      [null, null, "4", "true"],
      [false, null, "4", "true"],
      [null, false, "8", "true"],
      [false, false, "8", "false"],
    ];
    for (const [i, [deploy, powerOn, status, deployed]] of cases.entries()) {
      const body = instantiateParams({ name: `defaults-${i}`, deploy, powerOn, source: templateHref(server.url, UBUNTU) });
      const res = await instantiate(server.url, server.token, MOSCOW, body);
      expect(res.status, res.text).toBe(201);
      const task = (((res.doc.VApp as Record<string, unknown>).Tasks as Record<string, unknown>).Task as Record<string, string>[])[0]!;
      await waitForTask(task["@_href"]!);
      const read = await vcd(server.url, new URL(res.headers.get("location")!).pathname, { token: server.token });
      expect(read.doc.VApp, `deploy=${deploy} powerOn=${powerOn}`).toMatchObject({ "@_status": status, "@_deployed": deployed });
    }
    // REST (and gRPC) keep the proto's meaning: a bool left out is false, so that vApp is powered off, not deployed.
    const rest = await fetch(`${server.url}/vapp/v1/vdcs/${MOSCOW}/vapps:instantiate`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "defaults-rest", source: UBUNTU, networkName: "org-net-default" }),
    });
    expect(rest.status).toBe(200);
    const id = ((await rest.json()) as { id: string }).id;
    const tasks = await vcd(server.url, `/api/vApp/vapp-${id}`, { token: server.token });
    const restTask = (((tasks.doc.VApp as Record<string, unknown>).Tasks as Record<string, unknown> | undefined)?.Task as Record<string, string>[] | undefined)?.[0];
    if (restTask !== undefined) await waitForTask(restTask["@_href"]!);
    const built = await vcd(server.url, `/api/vApp/vapp-${id}`, { token: server.token });
    expect(built.doc.VApp).toMatchObject({ "@_status": "8", "@_deployed": "false" });
  });

  it("answers in the version the caller asked for, in Content-Type", async () => {
    const res = await vcd(server.url, "/api/query?type=vAppTemplate", { token: server.token, accept: "application/*;version=36.0" });
    expect(res.headers.get("content-type")).toBe(`${recordsType};version=36.0`);
  });

  it("writes the headers of the pipeline's stages on answers and refusals alike", async () => {
    const listed = await vcd(server.url, "/api/query?type=vAppTemplate", { token: server.token });
    expect(listed.headers.get("x-stage")).toBe("seen");
    const refused = await vcd(server.url, "/api/query?type=vAppTemplate&page=7", { token: server.token });
    expect(refused.status).toBe(400);
    expect(refused.headers.get("x-stage")).toBe("seen");
  });
});

// Last, so that the vApps it makes come after those the tests above look for.
describe("HEAD on the GET paths (RFC 9110 9.3.2)", () => {
  // Each GET path, and what HEAD must answer: the GET's status and headers, Content-Length the GET's body's, no body.
  async function compare(path: string, token: string | null = server.token): Promise<void> {
    const get = await vcd(server.url, path, { token });
    const head = await vcd(server.url, path, { method: "HEAD", token });
    expect(head.status).toBe(get.status);
    expect(head.text).toBe("");
    expect(head.headers.get("content-length")).toBe(String(Buffer.byteLength(get.text)));
    expect(head.headers.get("content-type")).toBe(get.headers.get("content-type"));
    expect(head.headers.get("x-stage")).toBe(get.headers.get("x-stage"));
    expect(head.headers.get("x-request-id")).toMatch(/./);
  }

  it("answers as the GET would, without the body: the query, a vApp, its task, and their refusals", async () => {
    const created = await instantiate(server.url, server.token, MOSCOW, instantiateParams({ name: "head-1", source: templateHref(server.url, UBUNTU) }));
    expect(created.status).toBe(201);
    const vapp = created.doc.VApp as Record<string, unknown>;
    const id = attr(vapp, "id")!.replace("urn:vcloud:vapp:", "");
    const taskHref = attr(((vapp.Tasks as Record<string, unknown>).Task as unknown[])[0], "href")!;
    await waitForTask(taskHref);
    await compare("/api/query?type=vAppTemplate&pageSize=2");
    await compare(`/api/vApp/vapp-${id}`);
    await compare(new URL(taskHref).pathname);
    // Refusals: an unknown vApp (404), no credentials (401), a bad query (400).
    await compare("/api/vApp/vapp-0badc0de-0000-4000-8000-000000000000");
    await compare(`/api/vApp/vapp-${id}`, null);
    await compare("/api/query?type=vApp");
  });

  it("is not taken where GET is not: 405 naming the methods the path takes", async () => {
    const res = await vcd(server.url, "/api/sessions", { method: "HEAD", token: server.token });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
    expect(res.text).toBe("");
    const query = await vcd(server.url, "/api/query?type=vAppTemplate", { method: "PUT", token: server.token });
    expect(query.headers.get("allow")).toBe("GET, HEAD");
  });
});

describe("hrefs under any form of the Host", () => {
  // The hrefs carry the Host as sent; the Source check compared it as text with the href's normalised host, so
  // "x.example:443" (and an IP literal or a percent-encoding) refused the server's own template href (a probe).
  it("takes back the template href it gave under any valid Host, the default port included", async () => {
    const withHost = (host: string, method: string, path: string, body?: string): Promise<{ status: number; text: string }> =>
      new Promise((resolve, reject) => {
        const headers: Record<string, string> = { authorization: `Bearer ${server.token}`, accept: ACCEPT, host };
        if (body !== undefined) Object.assign(headers, { "content-type": "application/vnd.vmware.vcloud.instantiateVAppTemplateParams+xml", "content-length": String(Buffer.byteLength(body)) });
        const req = http.request(`${server.url}${path}`, { method, headers }, (res) => {
          let text = "";
          res.on("data", (chunk: Buffer) => (text += chunk.toString()));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        });
        req.on("error", reject);
        req.end(body);
      });
    for (const [i, host] of ["x.example:443", "X.Example", "x.example:0443", "%78.example", "[0:0::1]", "127.000.0.1"].entries()) {
      const listed = await withHost(host, "GET", `/api/query?type=vAppTemplate&filter=${encodeURIComponent("name==ubuntu*")}`);
      const href = /<VAppTemplateRecord [^>]*href="([^"]+)"/.exec(listed.text)?.[1];
      expect(href, host).toBe(`https://${host}/api/vAppTemplate/vappTemplate-${UBUNTU}`);
      const made = await withHost(host, "POST", `/api/vdc/${MOSCOW}/action/instantiateVAppTemplate`, instantiateParams({ name: `host-form-${i}`, source: href! }));
      expect(made.status, `${host}: ${made.text}`).toBe(201);
    }
  });
});
