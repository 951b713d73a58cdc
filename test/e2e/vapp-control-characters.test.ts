import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { restFailure, restRequest } from "../support/kms-clients.js";
import { resourceSnapshot } from "../support/principals.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { MOSCOW, UBUNTU, errorXml, instantiate, instantiateParams, templateHref } from "./vcd-helpers.js";

// Control characters in a vApp's name and description, over REST and the XML surface alike: the domain's check is
// the same for both, C1 (U+0080 to U+009F) as C0 and DEL. Real server, real sockets; nothing is stored.

let server: TestServer;

beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server.stop());

const errorType = "application/vnd.vmware.vcloud.error+xml;version=38.0";

async function restRefused(body: Record<string, string>, field: string, description: string): Promise<void> {
  const before = resourceSnapshot(server.dataDir);
  const res = await restRequest(server.url, "POST", `/vapp/v1/vdcs/${MOSCOW}/vapps:instantiate`, { body: { source: UBUNTU, networkName: "org-net-default", ...body } });
  expect(res.status, JSON.stringify(body)).toBe(400);
  expect(res.contentType).toBe("application/json");
  const failure = restFailure(res);
  expect(failure).toMatchObject({ code: 3, message: `${field}: ${description}`, reason: "REQUEST_INVALID", domain: "compute", fieldViolations: [{ field, description }] });
  expect(resourceSnapshot(server.dataDir)).toEqual(before);
}

async function xmlRefused(body: string, message: string): Promise<void> {
  const before = resourceSnapshot(server.dataDir);
  const res = await instantiate(server.url, server.token, MOSCOW, body);
  expect(res.status, body).toBe(400);
  expect(res.headers.get("content-type")).toBe(errorType);
  expect(res.text).toBe(errorXml(400, "BAD_REQUEST", message, "REQUEST_INVALID"));
  expect(resourceSnapshot(server.dataDir)).toEqual(before);
}

const params = (p: Parameters<typeof instantiateParams>[0]): string => instantiateParams({ source: templateHref(server.url, UBUNTU), ...p });

describe("a vApp name with a control character", () => {
  it("is refused over REST, C1 (U+0085, U+009B, U+0080, U+009F) as C0 and DEL", async () => {
    for (const c of ["\u0085", "\u009b", "\u0080", "\u009f", "\u0001", "\u007f"]) {
      await restRefused({ name: `c1${c}x` }, "name", "must not hold control characters");
    }
  });

  it("is refused over XML, written as a reference or as it is", async () => {
    for (const name of ["a&#x85;b", "a&#x9B;b", "a&#128;b", "a\u0085b", "a\u009fb", "a&#x7F;b", "a&#x9;b"]) {
      await xmlRefused(params({ name }), "name: must not hold control characters");
    }
  });

  it("takes a format character that is no control character (U+200E)", async () => {
    const res = await instantiate(server.url, server.token, MOSCOW, params({ name: "ltr&#x200E;mark" }));
    expect(res.status, res.text).toBe(201);
  });
});

describe("a vApp description", () => {
  it("with a control character other than tab and line ends is refused, on both surfaces", async () => {
    for (const c of ["\u0000", "\u0001", "\u007f", "\u0085", "\u009b"]) {
      await restRefused({ name: "described", description: `a${c}b` }, "description", "must not hold control characters other than tab and line ends");
    }
    for (const description of ["a&#x85;b", "a&#x9B;b", "a&#x7F;b"]) {
      await xmlRefused(params({ name: "described", description }), "description: must not hold control characters other than tab and line ends");
    }
  });

  it("with tabs and line ends is taken", async () => {
    const rest = await restRequest(server.url, "POST", `/vapp/v1/vdcs/${MOSCOW}/vapps:instantiate`, { body: { name: "lines-rest", description: "a\tb\nc\r\n", source: UBUNTU, networkName: "org-net-default" } });
    expect(rest.status, rest.text).toBe(200);
    expect(rest.json).toMatchObject({ name: "lines-rest", description: "a\tb\nc\r\n" });
    const xml = await instantiate(server.url, server.token, MOSCOW, params({ name: "lines-xml", description: "a&#9;b&#10;c&#13;" }));
    expect(xml.status, xml.text).toBe(201);
  });
});

describe("a vApp name's length", () => {
  // 128 characters as people count them: an emoji is one, though UTF-16 takes two units for it.
  it("is counted in characters, on both surfaces", async () => {
    const emoji = "\u{1F600}";
    const rest = await restRequest(server.url, "POST", `/vapp/v1/vdcs/${MOSCOW}/vapps:instantiate`, { body: { name: emoji.repeat(128), source: UBUNTU, networkName: "org-net-default" } });
    expect(rest.status, rest.text).toBe(200);
    const xml = await instantiate(server.url, server.token, MOSCOW, params({ name: `x${emoji.repeat(127)}` }));
    expect(xml.status, xml.text).toBe(201);
    await restRefused({ name: emoji.repeat(129) }, "name", "must be at most 128 characters, got 129");
    await xmlRefused(params({ name: emoji.repeat(129) }), "name: must be at most 128 characters, got 129");
  });
});
