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

describe("references and characters XML forbids", () => {
  const forbidden = (ref: string, which: string): string => `the character reference ${ref} names ${which}, which XML 1.0 does not allow in a document`;
  const undeclared = (ref: string): string => `the entity ${ref} is not declared; only XML's predefined entities (&lt; &gt; &amp; &apos; &quot;) and character references are expanded`;

  it("a character reference to a character XML 1.0 excludes is 400, not dropped", async () => {
    const cases: [string, string][] = [
      ["&#1;", "U+0001"],
      ["&#0;", "U+0000"],
      ["&#x1F;", "U+001F"],
      ["&#xD800;", "U+D800"],
      ["&#xdfff;", "U+DFFF"],
      ["&#xFFFE;", "U+FFFE"],
      ["&#65535;", "U+FFFF"],
      ["&#x110000;", "no Unicode character"],
      ["&#99999999999999999999;", "no Unicode character"],
    ];
    for (const [ref, which] of cases) {
      await refused(params({ name: `a${ref}b` }), "BAD_REQUEST", forbidden(ref, which), "XML_INVALID");
      await refused(params({ description: `a${ref}b` }), "BAD_REQUEST", forbidden(ref, which), "XML_INVALID");
    }
  });

  it("an entity that was never declared, HTML's among them, is 400, not kept as text", async () => {
    for (const ref of ["&foo;", "&nbsp;", "&copy;"]) {
      await refused(params({ description: `a${ref}b` }), "BAD_REQUEST", undeclared(ref), "XML_INVALID");
      await refused(params({ name: `a${ref}b` }), "BAD_REQUEST", undeclared(ref), "XML_INVALID");
    }
  });

  it("a reference that is not of its form, or a bare &, is 400", async () => {
    await refused(params({ name: "a&#x;b" }), "BAD_REQUEST", "&#x; is not a character reference: write &#<decimal digits>; or &#x<hex digits>;", "XML_INVALID");
    await refused(params({ name: "a&#12a;b" }), "BAD_REQUEST", "&#12a; is not a character reference: write &#<decimal digits>; or &#x<hex digits>;", "XML_INVALID");
    await refused(params({ name: "a & b" }), "BAD_REQUEST", "an & begins no reference: write a literal & as &amp;", "XML_INVALID");
    await refused(params({ name: "a & b;" }), "BAD_REQUEST", "an & begins no reference: write a literal & as &amp;", "XML_INVALID");
  });

  it("such a character written as it is, or bytes that are not UTF-8, are 400", async () => {
    await refused(params({ description: "a\u0001b" }), "BAD_REQUEST", "the body holds U+0001 (line 2), which XML 1.0 does not allow in a document", "XML_INVALID");
    await refused(params({ name: "a\uFFFEb" }), "BAD_REQUEST", "the body holds U+FFFE (line 2), which XML 1.0 does not allow in a document", "XML_INVALID");
    const before = resourceSnapshot(server.dataDir);
    // C3 28: a lead byte whose continuation is missing.
    const [head, tail] = params({ description: "a" }).split("<Description>a") as [string, string];
    const bytes = Buffer.concat([Buffer.from(`${head}<Description>a`), Buffer.from([0xc3, 0x28]), Buffer.from(tail)]);
    const res = await fetch(`${server.url}/api/vdc/${MOSCOW}/action/instantiateVAppTemplate`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.token}`, accept: "application/*+xml;version=38.0", "content-type": "application/vnd.vmware.vcloud.instantiateVAppTemplateParams+xml" },
      body: bytes,
    });
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toBe(errorType);
    expect(await res.text()).toBe(errorXml(400, "BAD_REQUEST", "the body is not UTF-8 text; send the XML document encoded as UTF-8", "XML_INVALID"));
    expect(resourceSnapshot(server.dataDir)).toEqual(before);
  });

  it("the predefined entities and references to allowed characters are expanded", async () => {
    const res = await instantiate(server.url, server.token, MOSCOW, params({ name: "r&amp;d &lt;&gt;&quot;&apos; &#65;&#x1F600;&#xE000;", description: "&#x9;tab&#xA;&#xD;" }));
    expect(res.status, res.text).toBe(201);
    expect(await restVApp(res)).toMatchObject({ name: "r&d <>\"' A\u{1F600}\uE000", description: "\ttab\n\r" });
    // Line ends written as they are are read as XML reads them (section 2.11): CR LF and CR as LF.
    const lines = await instantiate(server.url, server.token, MOSCOW, params({ name: "lines", description: "l1\r\nl2\rl3\n" }));
    expect(lines.status, lines.text).toBe(201);
    expect(await restVApp(lines)).toMatchObject({ description: "l1\nl2\nl3\n" });
  });
});

describe("elements of text", () => {
  it("an element inside Description, IsSourceDelete or AllEULAsAccepted is 400, not left out of the text", async () => {
    await refused(params({ description: "a<b>x</b>c" }), "BAD_REQUEST", "Description takes text only; it holds the element b", "XML_INVALID");
    await refused(params({ eula: true }).replace("<AllEULAsAccepted>true", "<AllEULAsAccepted><x/>true"), "BAD_REQUEST", "AllEULAsAccepted takes text only; it holds the element x", "XML_INVALID");
    await refused(params({}).replace("</InstantiateVAppTemplateParams>", "<IsSourceDelete><no/>false</IsSourceDelete></InstantiateVAppTemplateParams>"), "BAD_REQUEST", "IsSourceDelete takes text only; it holds the element no", "XML_INVALID");
  });

  // Each of these was stored as a vApp (a probe, 2026-11-28): fast-xml-parser reads them; saxes, strict, refuses them.
  it("what XML 1.0 and its namespaces make a fatal error is 400, nothing stored", async () => {
    const declared = (decl: string, name = "decl") => params({ name }).replace('<?xml version="1.0" encoding="UTF-8"?>', decl);
    const cases: [string, string][] = [
      [params({ name: "wf<x" }), "disallowed character (line 2, column 133)"],
      [params({ name: "cdata-end", description: "a]]>b" }), 'the string "]]>" is disallowed in char data (line 2, column 189)'],
      [params({ name: "comment", description: "<!-- a -- b -->" }), "malformed comment (line 2, column 193)"],
      [declared('<?xml version="1.0" standalone="maybe"?>'), 'standalone value must match "yes" or "no" (line 1, column 38)'],
      [declared('<?xml version="abc"?>'), "version number must match /^1\\.[0-9]+$/ (line 1, column 19)"],
      [params({ name: "pi", description: "<?xml x?>" }), "an XML declaration must be at the start of the document (line 2, column 184)"],
      [params({ name: "empty-prefix" }).replace(' name="', ' xmlns:o="" name="'), "invalid attempt to undefine prefix in XML 1.0 (line 2, column 134)"],
      [params({ name: "xml-prefix" }).replace(' name="', ' xmlns:xml="urn:bad" name="'), "xml prefix must be bound to http://www.w3.org/XML/1998/namespace (line 2, column 143)"],
      [params({ name: "twice" }).replace(' name="', ' xmlns:a="urn:x" xmlns:b="urn:x" a:f="1" b:f="2" name="'), "duplicate attribute: {urn:x}f (line 2, column 216)"],
    ];
    for (const [body, problem] of cases) await refused(body, "BAD_REQUEST", `the body is not well-formed XML: ${problem}`, "XML_INVALID");
    // Read as UTF-8, a body that declares another encoding would not be the text it says it is.
    await refused(
      declared('<?xml version="1.0" encoding="ISO-8859-1"?>'),
      "BAD_REQUEST",
      "the body declares the encoding ISO-8859-1; this API reads UTF-8 only: send the document in UTF-8, declared so or not at all",
      "XML_INVALID",
    );
    const fine = ['<?xml version="1.0" encoding="utf-8"?>', '<?xml version="1.0"?>', '<?xml version="1.1" standalone="yes"?>', ""];
    for (const [i, decl] of fine.entries()) {
      const res = await instantiate(server.url, server.token, MOSCOW, declared(decl, `declared-${i}`));
      expect(res.status, decl).toBe(201);
    }
  });

  it("a comment inside the text is left out and CDATA is read as text, as XML has them", async () => {
    const res = await instantiate(server.url, server.token, MOSCOW, params({ name: "cdata", description: "a<!-- c -->b <![CDATA[<x> & y]]>" }));
    expect(res.status, res.text).toBe(201);
    expect(await restVApp(res)).toMatchObject({ description: "ab <x> & y" });
  });
});
