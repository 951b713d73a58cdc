import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resourceSnapshot } from "../support/principals.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { MOSCOW, UBUNTU, errorXml, instantiate, instantiateParams, templateHref, vcd } from "./vcd-helpers.js";
import type { XmlResponse } from "./vcd-helpers.js";

// The XML surface reads exactly what was sent: no value is trimmed or changed on the way to the domain, and what XML
// itself forbids (a reference to a character XML 1.0 excludes, an entity that was never declared) is refused, never
// dropped or kept as text. Over real sockets, against the real server.

let server: TestServer;

beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server.stop());

const errorType = "application/vnd.vmware.vcloud.error+xml;version=38.0";

function params(overrides: Parameters<typeof instantiateParams>[0] = {}): string {
  return instantiateParams({ name: "exact", source: templateHref(server.url, UBUNTU), ...overrides });
}

// Sends the request, expects a 400 Error document with exactly this message and reason, and that nothing was stored.
async function refused(body: string, minor: string, message: string, reason: string): Promise<void> {
  const before = resourceSnapshot(server.dataDir);
  const res = await instantiate(server.url, server.token, MOSCOW, body);
  expect(res.status, body).toBe(400);
  expect(res.headers.get("content-type")).toBe(errorType);
  expect(res.text, body).toBe(errorXml(400, minor, message, reason));
  expect(resourceSnapshot(server.dataDir)).toEqual(before);
}

// The vApp as the REST surface reads it back (JSON, so no XML reader of the test's can trim it).
async function restVApp(created: XmlResponse): Promise<{ name: string; description: string }> {
  const id = new URL(created.headers.get("location")!).pathname.slice("/api/vApp/vapp-".length);
  const res = await fetch(`${server.url}/vapp/v1/vapps/${id}`, { headers: { authorization: `Bearer ${server.token}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as { name: string; description: string };
}

describe("white space in values", () => {
  it("a name with surrounding space, written or as &#x20;, is refused as on REST", async () => {
    for (const name of [" sp1", "sp2 ", "&#x20;sp3", "sp4&#xA0;"]) {
      await refused(params({ name }), "BAD_REQUEST", "name: must not begin or end with white space", "REQUEST_INVALID");
    }
  });

  it("a Description keeps its spaces, in the answer and as stored", async () => {
    const res = await instantiate(server.url, server.token, MOSCOW, params({ name: "spaced-description", description: "  a  b  " }));
    expect(res.status).toBe(201);
    expect(res.text).toContain("<Description>  a  b  </Description>");
    expect(await restVApp(res)).toMatchObject({ name: "spaced-description", description: "  a  b  " });
    const read = await vcd(server.url, new URL(res.headers.get("location")!).pathname, { token: server.token });
    expect(read.text).toContain("<Description>  a  b  </Description>");
  });

  it("white space between elements, as a pretty-printed document has it, is fine", async () => {
    const body = params({ name: "pretty", description: "d", eula: true }).replaceAll("><", ">\n  \t<");
    const res = await instantiate(server.url, server.token, MOSCOW, body);
    expect(res.status, res.text).toBe(201);
    expect(await restVApp(res)).toMatchObject({ name: "pretty", description: "d" });
  });
});
