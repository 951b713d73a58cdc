import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makePrincipal, resourceSnapshot } from "../support/principals.js";
import type { Principal } from "../support/principals.js";
import { rawRequest } from "../support/raw-http1.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { CENTOS, MOSCOW, SPB, UBUNTU, errorXml, instantiate, instantiateParams, site, templateHref, vcd } from "./vcd-helpers.js";
import type { XmlResponse } from "./vcd-helpers.js";

// Every bad request of issue 11, as a VCD client would send it: each is answered with its status and a VCD Error
// document (never JSON, never a stack trace), and nothing is stored.

let server: TestServer;
// May create vApps in the St Petersburg vDC only.
let spbEditor: Principal;

beforeAll(async () => {
  server = await startServer();
  spbEditor = await makePrincipal(server, "spb-editor", [["editor", `service-instance:${SPB}`]]);
});
afterAll(() => server.stop());

const errorType = "application/vnd.vmware.vcloud.error+xml;version=38.0";
const ACCEPT_38 = "application/*+xml;version=38.0";
const orRefused = "',' (or) is not supported: conditions are attribute==value or attribute!=value, joined by ';' (and); to match a value that holds a comma, write * in its place";
const supported = "36.0, 36.1, 36.2, 36.3, 37.0, 37.1, 37.2, 37.3, 38.0, 38.1";

// Runs the request and checks that the store is as it was.
async function unchanged(send: () => Promise<XmlResponse>): Promise<XmlResponse> {
  const before = resourceSnapshot(server.dataDir);
  const res = await send();
  expect(resourceSnapshot(server.dataDir)).toEqual(before);
  expect(res.text.startsWith('<?xml version="1.0" encoding="UTF-8"?>\n<Error ')).toBe(true);
  return res;
}

function good(overrides: Parameters<typeof instantiateParams>[0] = {}): string {
  return instantiateParams({ name: "bad-input", source: templateHref(server.url, UBUNTU), ...overrides });
}

describe("an instantiation refused", () => {
  it("without a version in Accept, or with version 1.5: 406 listing the supported versions", async () => {
    for (const accept of [null, "application/*+xml", "application/*;version=1.5"]) {
      const res = await unchanged(() => vcd(server.url, `/api/vdc/${MOSCOW}/action/instantiateVAppTemplate`, {
        method: "POST",
        token: server.token,
        accept,
        contentType: "application/vnd.vmware.vcloud.instantiateVAppTemplateParams+xml",
        body: good(),
      }));
      expect(res.status).toBe(406);
      expect(res.headers.get("content-type")).toBe("application/xml");
      expect(res.text).toBe(errorXml(406, "NOT_ACCEPTABLE", `send Accept: application/*;version=<v> with a supported version: ${supported}`, "PROTOCOL_ERROR"));
    }
  });

  it("without a token, or with a bad one: 401", async () => {
    for (const token of [null, "cpat.nope.nope"]) {
      const res = await unchanged(() => instantiate(server.url, token as string, MOSCOW, good()));
      expect(res.status).toBe(401);
      // RFC 9110 15.5.2: a 401 carries its challenge; every call but POST /api/sessions takes the bearer token.
      expect(res.headers.get("www-authenticate")).toBe('Bearer realm="cloudplane"');
      expect(res.headers.get("content-type")).toBe(errorType);
      expect(res.doc.Error).toMatchObject({ "@_majorErrorCode": "401", "@_minorErrorCode": "UNAUTHORIZED", "@_vendorSpecificErrorCode": "UNAUTHENTICATED" });
    }
  });

  it("with another Content-Type: 415", async () => {
    const res = await unchanged(() => instantiate(server.url, server.token, MOSCOW, good(), "application/xml"));
    expect(res.status).toBe(415);
    expect(res.headers.get("content-type")).toBe(errorType);
    expect(res.text).toBe(errorXml(415, "UNSUPPORTED_MEDIA_TYPE", "send the body as Content-Type: application/vnd.vmware.vcloud.instantiateVAppTemplateParams+xml, not application/xml", "UNSUPPORTED_CONTENT_TYPE"));
  });

  it("with malformed XML, an empty body or another document: 400", async () => {
    const cases: [string, string][] = [
      [good().replace("</InstantiateVAppTemplateParams>", ""), "the body is not well-formed XML: Unclosed tag 'InstantiateVAppTemplateParams'. (line 2)"],
      ["", "the body is empty; send the request's XML document"],
      ['<InstantiateVAppTemplateParams name="x"/>', "the body must be an InstantiateVAppTemplateParams element of namespace http://www.vmware.com/vcloud/v1.5, got InstantiateVAppTemplateParams of no namespace"],
    ];
    for (const [body, message] of cases) {
      const res = await unchanged(() => instantiate(server.url, server.token, MOSCOW, body));
      expect(res.status).toBe(400);
      expect(res.text).toBe(errorXml(400, "BAD_REQUEST", message, "XML_INVALID"));
    }
  });

  it("nested too deep: 400; larger than 64 KiB: 413, unread", async () => {
    const deep = good().replace("<Description>", "<Description>").replace("</InstantiateVAppTemplateParams>", `<AllEULAsAccepted>${"<x>".repeat(40)}${"</x>".repeat(40)}</AllEULAsAccepted></InstantiateVAppTemplateParams>`);
    const nested = await unchanged(() => instantiate(server.url, server.token, MOSCOW, deep));
    expect(nested.status).toBe(400);
    expect(nested.text).toBe(errorXml(400, "BAD_REQUEST", "the body nests elements more than 32 deep", "XML_INVALID"));
    const large = good({ description: "d".repeat(64 * 1024) });
    const res = await unchanged(() => instantiate(server.url, server.token, MOSCOW, large));
    expect(res.status).toBe(413);
    expect(res.doc.Error).toMatchObject({ "@_majorErrorCode": "413", "@_vendorSpecificErrorCode": "REQUEST_TOO_LARGE" });
  });

  it("with a DOCTYPE, an entity bomb among them: 400, nothing expanded", async () => {
    const bomb =
      '<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">' +
      '<!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">]>' +
      `<InstantiateVAppTemplateParams xmlns="http://www.vmware.com/vcloud/v1.5" name="&lol2;"><Source href="${templateHref(server.url, UBUNTU)}"/></InstantiateVAppTemplateParams>`;
    const external = `<?xml version="1.0"?>\n<!DOCTYPE x SYSTEM "file:///etc/passwd">${good()}`;
    for (const body of [bomb, external]) {
      const res = await unchanged(() => instantiate(server.url, server.token, MOSCOW, body));
      expect(res.status).toBe(400);
      expect(res.text).toBe(errorXml(400, "BAD_REQUEST", "the body declares a DOCTYPE or entities, which this API does not accept", "XML_INVALID"));
    }
  });

  it("with children out of the schema's order, or repeated: 400", async () => {
    const body = good().replace(/(<InstantiationParams>.*<\/InstantiationParams>)(<Source [^>]*\/>)/, "$2$1");
    const res = await unchanged(() => instantiate(server.url, server.token, MOSCOW, body));
    expect(res.status).toBe(400);
    expect(res.text).toBe(errorXml(400, "BAD_REQUEST", "InstantiationParams must come before Source in InstantiateVAppTemplateParams; the schema's order is Description, VAppParent, InstantiationParams, Source, IsSourceDelete, SourcedItem, AllEULAsAccepted, ComputePolicy", "XML_INVALID"));
    const twice = good().replace(/(<Source [^>]*\/>)/, "$1$1");
    const again = await unchanged(() => instantiate(server.url, server.token, MOSCOW, twice));
    expect(again.text).toBe(errorXml(400, "BAD_REQUEST", "InstantiateVAppTemplateParams holds Source twice", "XML_INVALID"));
  });

  it("without a name or without a Source: 400 naming the field", async () => {
    const noName = await unchanged(() => instantiate(server.url, server.token, MOSCOW, good({ name: null })));
    expect(noName.status).toBe(400);
    expect(noName.text).toBe(errorXml(400, "BAD_REQUEST", "name: is required: the name of the new vApp", "REQUEST_INVALID"));
    const noSource = await unchanged(() => instantiate(server.url, server.token, MOSCOW, good({ source: null })));
    expect(noSource.text).toBe(errorXml(400, "BAD_REQUEST", "source: is required: the href of a vApp template (Source href)", "REQUEST_INVALID"));
  });

  it("with a template href of another site or an unknown template: 400 INVALID_REFERENCE", async () => {
    const foreign = `https://vcd.elsewhere.example/api/vAppTemplate/vappTemplate-${UBUNTU}`;
    const cases: [string, string][] = [
      [foreign, `source: "${foreign}" is not a vApp template href of this site: ${site(server.url)}/api/vAppTemplate/vappTemplate-<id>`],
      [templateHref(server.url, "0badc0de-0000-4000-8000-000000000000"), 'source: no vApp template has the id "0badc0de-0000-4000-8000-000000000000"'],
      [`${site(server.url)}/api/vdc/${MOSCOW}`, `source: "${site(server.url)}/api/vdc/${MOSCOW}" is not a vApp template href of this site: ${site(server.url)}/api/vAppTemplate/vappTemplate-<id>`],
      // The template's own href in forms the URL parser rewrites (a probe, 2026-11-27): user information, a fragment,
      // a query, dot segments.
      ...[
        templateHref(server.url, UBUNTU).replace("https://", "https://user:pw@"),
        `${templateHref(server.url, UBUNTU)}#frag`,
        `${templateHref(server.url, UBUNTU)}?x=1`,
        templateHref(server.url, UBUNTU).replace("/api/vAppTemplate/", "/api/nope/../vAppTemplate/"),
        templateHref(server.url, UBUNTU).replace("/api/vAppTemplate/", "/api/./vAppTemplate/"),
        templateHref(server.url, UBUNTU).replace("https://", "https:"),
        ` ${templateHref(server.url, UBUNTU)}`,
      ].map((href): [string, string] => [href, `source: "${href}" is not a vApp template href of this site: ${site(server.url)}/api/vAppTemplate/vappTemplate-<id>`]),
    ];
    for (const [source, message] of cases) {
      const res = await unchanged(() => instantiate(server.url, server.token, MOSCOW, good({ source })));
      expect(res.status).toBe(400);
      expect(res.text).toBe(errorXml(400, "INVALID_REFERENCE", message, "INVALID_REFERENCE"));
    }
  });

  it("with an org network that is not one of the vDC's: 400 INVALID_REFERENCE", async () => {
    // org-net-dev exists, in the other vDC.
    const res = await unchanged(() => instantiate(server.url, server.token, MOSCOW, good({ network: "org-net-dev" })));
    expect(res.status).toBe(400);
    expect(res.text).toBe(errorXml(400, "INVALID_REFERENCE", `networkName: vDC ${MOSCOW} has no org network named "org-net-dev"; its networks: org-net-default, org-net-isolated`, "INVALID_REFERENCE"));
  });

  it("of a template with EULAs that were not accepted: 400 EULA_NOT_ACCEPTED", async () => {
    for (const eula of [undefined, false]) {
      const res = await unchanged(() => instantiate(server.url, server.token, MOSCOW, good({ source: templateHref(server.url, CENTOS), eula })));
      expect(res.status).toBe(400);
      expect(res.text).toBe(errorXml(400, "BAD_REQUEST", `allEulasAccepted: vApp template ${CENTOS} has EULAs: accept them (AllEULAsAccepted true) to instantiate it`, "EULA_NOT_ACCEPTED"));
    }
  });

  it("in an unknown vDC, or one the caller has no rights on: 403", async () => {
    const unknown = await unchanged(() => instantiate(server.url, server.token, "no-such-vdc", good()));
    expect(unknown.status).toBe(403);
    expect(unknown.text).toBe(errorXml(403, "ACCESS_TO_RESOURCE_IS_FORBIDDEN", "service instance no-such-vdc not found", "SERVICE_INSTANCE_NOT_FOUND"));
    const foreign = await unchanged(() => instantiate(server.url, spbEditor.token, MOSCOW, good()));
    expect(foreign.status).toBe(403);
    expect(foreign.text).toBe(errorXml(403, "ACCESS_TO_RESOURCE_IS_FORBIDDEN", `principal ${spbEditor.id} lacks permission compute.vapps.create on service-instance:${MOSCOW}`, "PERMISSION_DENIED"));
    // A vDC id with an ESC or a NUL in it was repeated raw, and the Error document was not XML (a probe, 2026-11-28).
    for (const [vdc, shown] of [["x%1By", "x\\u001by"], ["x%00y", "x\\u0000y"]]) {
      const odd = await unchanged(() => instantiate(server.url, spbEditor.token, vdc!, good()));
      expect(odd.status).toBe(403);
      expect(odd.text).toBe(errorXml(403, "ACCESS_TO_RESOURCE_IS_FORBIDDEN", `principal ${spbEditor.id} lacks permission compute.vapps.create on service-instance:${shown}`, "PERMISSION_DENIED"));
    }
  });

  it("with a name taken in the vDC: 409 DUPLICATE_NAME", async () => {
    const first = await instantiate(server.url, server.token, MOSCOW, good({ name: "taken" }));
    expect(first.status).toBe(201);
    const res = await unchanged(() => instantiate(server.url, server.token, MOSCOW, good({ name: "taken" })));
    expect(res.status).toBe(409);
    expect(res.doc.Error).toMatchObject({ "@_minorErrorCode": "DUPLICATE_NAME", "@_vendorSpecificErrorCode": "VAPP_NAME_TAKEN" });
  });
});

const MALFORMED = "a malformed percent-encoded sequence (a % not followed by two hex digits, or bytes that are not UTF-8)";

describe("a query refused", () => {
  it("answers 400 for a bad type, format, parameter, page size, filter or sort", async () => {
    const cases: [string, string, string][] = [
      ["type=vApp", 'query type "vApp" is not supported; this server answers type=vAppTemplate', "QUERY_INVALID"],
      ["type=vAppTemplate&format=references", 'query format "references" is not supported; this server answers format=records', "QUERY_INVALID"],
      ["type=vAppTemplate&pageSize=ten", 'the query parameter pageSize must be a whole number, got "ten"', "QUERY_INVALID"],
      ["type=vAppTemplate&color=red", 'unknown query parameter "color"; allowed: type, page, pageSize, format, filter, sortAsc, sortDesc', "QUERY_INVALID"],
      ["type=vAppTemplate&pageSize=129", "pageSize: must be between 1 and 128, got 129", "REQUEST_INVALID"],
      ["type=vAppTemplate&page=9", "page: must be at most 1, the last page of 3 records at 25 a page; got 9", "REQUEST_INVALID"],
      ["type=vAppTemplate&filter=color==red", 'filter: unknown attribute "color"; allowed: name, catalogName, vdc, vdcName, ownerName, status, isDeployed, isGoldMaster, isEnabled, storageProfileName', "REQUEST_INVALID"],
      ["type=vAppTemplate&filter=name", 'filter: each condition is attribute==value or attribute!=value, joined by \';\'; got "name"', "REQUEST_INVALID"],
      ["type=vAppTemplate&sortAsc=name&sortDesc=name", "sortDesc: give sortAsc or sortDesc, not both", "REQUEST_INVALID"],
      // 0 is no page and no page size: refused as written, not read as the default.
      ["type=vAppTemplate&page=0", "page: must be 1 or more, got 0", "REQUEST_INVALID"],
      ["type=vAppTemplate&page=00&pageSize=5", "page: must be 1 or more, got 0", "REQUEST_INVALID"],
      ["type=vAppTemplate&pageSize=0", "pageSize: must be between 1 and 128, got 0", "REQUEST_INVALID"],
      // VCD's "," (or) is not supported: refused, not read as part of a value (which answered total=0).
      ["type=vAppTemplate&filter=name==Ubuntu*,name==CentOS*", `filter: ${orRefused}`, "REQUEST_INVALID"],
      ["type=vAppTemplate&filter=(name==a;isEnabled==true),vdcName==b", `filter: ${orRefused}`, "REQUEST_INVALID"],
      // A malformed percent escape: it was read as U+FFFD, and `filter=name==%FF` answered total="0".
      ["type=vAppTemplate&filter=name==%FF", `filter: invalid value in the query string; ${MALFORMED}`, "REQUEST_INVALID"],
      ["type=vApp%FFTemplate", `type: invalid value in the query string; ${MALFORMED}`, "REQUEST_INVALID"],
      ["type=vAppTemplate&%E0%A4=1", `invalid value in the query string; ${MALFORMED}`, "REQUEST_INVALID"],
    ];
    for (const [query, message, reason] of cases) {
      const res = await vcd(server.url, `/api/query?${query}`, { token: server.token });
      expect(res.status, query).toBe(400);
      expect(res.headers.get("content-type"), query).toBe(errorType);
      expect(res.text, query).toBe(errorXml(400, "BAD_REQUEST", message, reason));
    }
  });

  it("refuses a filter with ',' over REST too, since the domain reads filters for every surface", async () => {
    const res = await fetch(`${server.url}/vapp/v1/vappTemplates?filter=${encodeURIComponent("name==a,name==b")}`, { headers: { authorization: `Bearer ${server.token}` } });
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(((await res.json()) as { message: string }).message).toBe(`filter: ${orRefused}`);
  });
});

// Over REST a 0 is the default (proto3 cannot tell it from absent): the refusals of other numbers say so. They said
// "between 1 and 128" while 0 was taken (a probe of the docs, 2026-11-28).
describe("the template list's page over REST", () => {
  it("takes 0 as the default, and says so when it refuses a number", async () => {
    const get = (query: string) => fetch(`${server.url}/vapp/v1/vappTemplates?${query}`, { headers: { authorization: `Bearer ${server.token}` } });
    const zero = await get("page=0&pageSize=0");
    expect(zero.status).toBe(200);
    expect(await zero.json()).toMatchObject({ page: 1, pageSize: 25 });
    const over = await get("pageSize=129");
    expect(over.status).toBe(400);
    expect(((await over.json()) as { message: string }).message).toBe("pageSize: must be from 1 to 128 (0 or none is 25), got 129");
  });
});

describe("reading", () => {
  it("an unknown vApp or task, or one of a vDC the caller has no grant on: 404", async () => {
    const made = await instantiate(server.url, server.token, MOSCOW, good({ name: "hidden" }));
    const vappPath = new URL(made.headers.get("location")!).pathname;
    const id = vappPath.slice("/api/vApp/vapp-".length);
    const unknown = await vcd(server.url, "/api/vApp/vapp-0badc0de-0000-4000-8000-000000000000", { token: server.token });
    expect(unknown.status).toBe(404);
    expect(unknown.text).toBe(errorXml(404, "RESOURCE_NOT_FOUND", "vApp 0badc0de-0000-4000-8000-000000000000 not found", "VAPP_NOT_FOUND"));
    const hidden = await vcd(server.url, vappPath, { token: spbEditor.token });
    expect(hidden.text).toBe(errorXml(404, "RESOURCE_NOT_FOUND", `vApp ${id} not found`, "VAPP_NOT_FOUND"));
    const task = await vcd(server.url, "/api/task/nope", { token: server.token });
    expect(task.text).toBe(errorXml(404, "RESOURCE_NOT_FOUND", "task nope not found", "VAPP_TASK_NOT_FOUND"));
  });

  it("with another method, or at an unknown path: 405 and 404", async () => {
    const method = await vcd(server.url, "/api/query?type=vAppTemplate", { method: "DELETE", token: server.token });
    expect(method.status).toBe(405);
    expect(method.headers.get("allow")).toBe("GET, HEAD");
    expect(method.headers.get("content-type")).toBe(errorType);
    expect(method.text).toBe(errorXml(405, "METHOD_NOT_ALLOWED", "/api/query takes GET, HEAD", "METHOD_NOT_ALLOWED"));
    for (const [verb, at] of [["POST", "/api/vApp/vapp-x/power/action/powerOn"], ["GET", "/api/foo"]] as const) {
      const path = await vcd(server.url, at, { method: verb, token: server.token });
      expect(path.status).toBe(404);
      expect(path.headers.get("content-type")).toBe(errorType);
      expect(path.text).toBe(errorXml(404, "RESOURCE_NOT_FOUND", `no resource at ${at}`, "ROUTE_NOT_FOUND"));
    }
  });
});

describe("a request Node's parser refuses before the adapter runs", () => {
  it("a head over 16 KiB on /api/ is 431 as an Error document, REQUEST_HEAD_TOO_LARGE, and the connection closed", async () => {
    for (const head of [
      `GET /api/query?type=vAppTemplate HTTP/1.1\r\nhost: a\r\naccept: ${ACCEPT_38}\r\nx-padding: ${"p".repeat(17_000)}\r\n\r\n`,
      `GET /api/vApp/vapp-${"x".repeat(16_500)} HTTP/1.1\r\nhost: a\r\n\r\n`,
    ]) {
      const res = await rawRequest(server.port, head);
      expect(res.status).toBe(431);
      expect(res.headers["content-type"]).toBe("application/xml");
      expect(res.headers.connection).toBe("close");
      expect(res.body).toBe(errorXml(431, "BAD_REQUEST", "the request line and headers are larger than 16384 bytes", "REQUEST_HEAD_TOO_LARGE"));
    }
  });

  it("a Host header that is not a host and port, on /api/, is 400 as an Error document, and no vApp is made", async () => {
    const res = await unchanged(async () => {
      const raw = await rawRequest(
        server.port,
        `POST /api/vdc/${MOSCOW}/action/instantiateVAppTemplate HTTP/1.1\r\nhost: evil.test/x?\r\naccept: ${ACCEPT_38}\r\nauthorization: Bearer ${server.token}\r\ncontent-type: application/vnd.vmware.vcloud.instantiateVAppTemplateParams+xml\r\ncontent-length: ${Buffer.byteLength(good())}\r\n\r\n${good()}`,
      );
      return { status: raw.status, headers: new Headers(raw.headers), text: raw.body, doc: {} };
    });
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toBe("application/xml");
    expect(res.text).toBe(errorXml(400, "BAD_REQUEST", "the Host header must be a host name or address, with an optional port (RFC 9110, section 7.2)", "PROTOCOL_ERROR"));
  });

  // HTTP/1.1 allows an empty Host, but the links of every answer here are made with it: they were "https:///api/...",
  // a URI RFC 9110 (4.2.1) says must be rejected (a probe, 2026-11-28). The REST surface's template links alike.
  it("an empty Host is 400 where answers hold links, and nothing is made", async () => {
    const emptyHost = "the Host header is empty: the links of this answer need the host the request was sent to (RFC 9110, section 4.2.1)";
    const heads = [
      `POST /api/vdc/${MOSCOW}/action/instantiateVAppTemplate HTTP/1.1\r\nconnection: close\r\nhost: \r\naccept: ${ACCEPT_38}\r\nauthorization: Bearer ${server.token}\r\ncontent-type: application/vnd.vmware.vcloud.instantiateVAppTemplateParams+xml\r\ncontent-length: ${Buffer.byteLength(good())}\r\n\r\n${good()}`,
      `GET /api/query?type=vAppTemplate HTTP/1.1\r\nconnection: close\r\nhost:\r\naccept: ${ACCEPT_38}\r\nauthorization: Bearer ${server.token}\r\n\r\n`,
      `POST /api/sessions HTTP/1.1\r\nconnection: close\r\nhost: \r\naccept: ${ACCEPT_38}\r\nauthorization: Basic ${Buffer.from("x:y").toString("base64")}\r\ncontent-length: 0\r\n\r\n`,
    ];
    for (const head of heads) {
      const res = await unchanged(async () => {
        const raw = await rawRequest(server.port, head);
        return { status: raw.status, headers: new Headers(raw.headers), text: raw.body, doc: {} };
      });
      expect(res.status).toBe(400);
      expect(res.headers.get("content-type")).toBe("application/vnd.vmware.vcloud.error+xml;version=38.0");
      expect(res.text).toBe(errorXml(400, "BAD_REQUEST", emptyHost, "PROTOCOL_ERROR"));
    }
    const rest = await rawRequest(server.port, `GET /vapp/v1/vappTemplates HTTP/1.1\r\nconnection: close\r\nhost: \r\nauthorization: Bearer ${server.token}\r\n\r\n`);
    expect(rest.status).toBe(400);
    expect(JSON.parse(rest.body)).toMatchObject({ code: 3, message: emptyHost });
    // A Host that names the server is served as before.
    const served = await rawRequest(server.port, `GET /api/query?type=vAppTemplate HTTP/1.1\r\nconnection: close\r\nhost: a.test\r\naccept: ${ACCEPT_38}\r\nauthorization: Bearer ${server.token}\r\n\r\n`);
    expect(served.status).toBe(200);
    expect(served.body).toContain('href="https://a.test/api/query?');
  });

  it("a head Node cannot parse on /api/ is 400 as an Error document, PROTOCOL_ERROR", async () => {
    const res = await rawRequest(server.port, `POST /api/vdc/${MOSCOW}/action/instantiateVAppTemplate HTTP/1.1\r\nhost: a\r\nno colon here\r\n\r\n`);
    expect(res.status).toBe(400);
    expect(res.headers["content-type"]).toBe("application/xml");
    expect(res.body).toBe(errorXml(400, "BAD_REQUEST", "the request is not well-formed HTTP/1.1", "PROTOCOL_ERROR"));
  });
});
