import { XMLParser, XMLValidator } from "fast-xml-parser";
import { SaxesParser } from "saxes";
import { XmlRefusal } from "./xml-refusal.js";
import { codePointName, isXmlChar, strictReferences } from "./xml-references.js";

// Request documents of the virtualization API, read with fast-xml-parser into elements with resolved namespaces.
// No DTD is ever read: the library would read a DOCTYPE's entity declarations, so a body that holds the markup of
// one (`<!DOCTYPE`, `<!ENTITY`) is refused before parsing. Only XML's five predefined entities and character
// references are expanded; any other entity, or a reference to a character XML 1.0 forbids, is refused
// (`xml-references.ts`), as is such a character written as it is. What fast-xml-parser reads leniently besides (a raw
// `<` in an attribute value, `]]>` in text, `--` in a comment, an XML declaration that is not one, a prefix bound to
// nothing or `xml` bound elsewhere, two attributes of one expanded name), XML 1.0 and its namespaces make fatal, and
// saxes, a strict parser, finds (wellFormed).

export interface XmlElement {
  // Namespace URI; "" for none.
  ns: string;
  name: string;
  attributes: Map<string, string>;
  children: XmlElement[];
  // The element's text exactly as sent (its text nodes joined, references expanded, nothing trimmed).
  text: string;
}

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: "",
  preserveOrder: true,
  parseTagValue: false,
  parseAttributeValue: false,
  // The library trims every text and attribute value by default, which stored name=" a" as "a" while REST refuses
  // that name; values are passed on exactly as sent, for the domain to check as it does for every surface. The
  // white space between elements is kept too, as text of their parent, and ignored there.
  trimValues: false,
  processEntities: true,
  // Expands the predefined entities and character references, and refuses every other reference.
  entityDecoder: strictReferences,
  ignoreDeclaration: true,
  ignorePiTags: true,
});

type Node = Record<string, unknown> & { ":@"?: Record<string, string> };

// The request documents of this API are a few levels deep; a deeper one is refused rather than walked.
export const MAX_XML_DEPTH = 32;

export function readXml(body: string): XmlElement {
  if (body.includes("<!DOCTYPE") || body.includes("<!ENTITY")) {
    throw new XmlRefusal("the body declares a DOCTYPE or entities, which this API does not accept");
  }
  if (body.trim() === "") throw new XmlRefusal("the body is empty; send the request's XML document");
  refuseForbiddenCharacters(body);
  // XML's end-of-line handling (section 2.11), which the library leaves out: a processor reads CR LF and a lone CR
  // as LF, before parsing, so a Description written on Windows is stored as the same text.
  body = body.replaceAll("\r\n", "\n").replaceAll("\r", "\n");
  const valid = XMLValidator.validate(body);
  if (valid !== true) throw new XmlRefusal(`the body is not well-formed XML: ${valid.err.msg} (line ${valid.err.line})`);
  let nodes: Node[];
  try {
    nodes = parser.parse(body) as Node[];
  } catch (err) {
    if (err instanceof XmlRefusal) throw err;
    // The library's own limits (nesting, entity expansion) and whatever its validator let through.
    throw new XmlRefusal(`the body could not be read as XML: ${err instanceof Error ? err.message : String(err)}`);
  }
  const roots = nodes.filter((n) => elementName(n) !== null);
  if (roots.length !== 1) throw new XmlRefusal("the body must hold exactly one root element");
  const root = toElement(roots[0]!, new Map([["xml", "http://www.w3.org/XML/1998/namespace"]]), 1);
  wellFormed(body);
  return root;
}

// Refuses what XML 1.0 and Namespaces in XML make a fatal error, and an encoding declared other than UTF-8 (the body
// was read as UTF-8: another declaration would say its text is not what was read). Run once fast-xml-parser has read
// the body into elements, so that the refusals of the checks above, which name what to write instead, come first. Until 2026-11-28
// each of these was stored as a vApp (a probe).
function wellFormed(body: string): void {
  const parser = new SaxesParser({ xmlns: true, position: true });
  let problem: string | null = null;
  parser.on("error", (err) => {
    problem ??= `the body is not well-formed XML: ${err.message.replace(/^(\d+):(\d+): (.*?)\.?$/, "$3 (line $1, column $2)")}`;
  });
  parser.on("xmldecl", (decl) => {
    if (decl.encoding !== undefined && decl.encoding.toUpperCase() !== "UTF-8") {
      problem ??= `the body declares the encoding ${decl.encoding.slice(0, 40)}; this API reads UTF-8 only: send the document in UTF-8, declared so or not at all`;
    }
  });
  parser.write(body).close();
  if (problem !== null) throw new XmlRefusal(problem);
}

// A character outside XML 1.0's Char production (a C0 control other than tab, line feed and carriage return, U+FFFE,
// U+FFFF) makes the document not well-formed; the library's validator lets it through.
function refuseForbiddenCharacters(body: string): void {
  let line = 1;
  for (const c of body) {
    const cp = c.codePointAt(0)!;
    if (cp === 0x0a) line++;
    else if (!isXmlChar(cp)) throw new XmlRefusal(`the body holds ${codePointName(cp)} (line ${line}), which XML 1.0 does not allow in a document`);
  }
}

function elementName(node: Node): string | null {
  for (const key of Object.keys(node)) if (key !== ":@" && key !== "#text") return key;
  return null;
}

function toElement(node: Node, scope: Map<string, string>, depth: number): XmlElement {
  const qname = elementName(node)!;
  if (depth > MAX_XML_DEPTH) throw new XmlRefusal(`the body nests elements more than ${MAX_XML_DEPTH} deep`);
  const attrs = node[":@"] ?? {};
  let inner = scope;
  const attributes = new Map<string, string>();
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "xmlns" || key.startsWith("xmlns:")) {
      if (inner === scope) inner = new Map(scope);
      inner.set(key === "xmlns" ? "" : key.slice(6), value);
    } else {
      attributes.set(key, value);
    }
  }
  const colon = qname.indexOf(":");
  const prefix = colon < 0 ? "" : qname.slice(0, colon);
  const ns = inner.get(prefix);
  if (ns === undefined && prefix !== "") throw new XmlRefusal(`the element ${qname} uses the undeclared namespace prefix ${prefix}`);
  const children: XmlElement[] = [];
  let text = "";
  for (const child of node[qname] as Node[]) {
    if (elementName(child) !== null) children.push(toElement(child, inner, depth + 1));
    else if (typeof child["#text"] === "string") text += child["#text"];
  }
  return { ns: ns ?? "", name: colon < 0 ? qname : qname.slice(colon + 1), attributes, children, text };
}

// xs:boolean, whose white space the schema collapses (so " true " is true); `absent` when not given, the schema's
// default.
export function xmlBoolean(value: string | undefined, what: string, absent = false): boolean {
  switch (value?.trim()) {
    case undefined:
      return absent;
    case "false":
    case "0":
      return false;
    case "true":
    case "1":
      return true;
    default:
      throw new XmlRefusal(`${what} must be true or false, got ${JSON.stringify(value)}`);
  }
}
