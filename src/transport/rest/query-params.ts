import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { quoted } from "../../errors/caller-text.js";
import { isTextField, resolveFieldPath, textToJson } from "./field-path.js";
import { isJsonObject } from "./json-check.js";
import { MALFORMED_ESCAPE, badRequest } from "./rest-errors.js";
import type { BodyBinding, RestRoute } from "./route-table.js";

// Refuses a query string with a parameter whose name or value cannot be percent-decoded, naming the parameter (as it
// decodes): URLSearchParams reads such an escape as U+FFFD, so `?parentId=demo%FF` listed the namespace "demo\uFFFD"
// while the same escape in the path was refused (a probe, 2026-11-28).
export function refuseMalformedEscapes(query: string): void {
  const name = malformedEscapeParameter(query);
  if (name !== null) throw badRequest("REQUEST_INVALID", name, `invalid value in the query string; ${MALFORMED_ESCAPE}`);
}

// The name (as it decodes; "" when the name itself does not) of the first parameter of a raw query string whose
// name or value has a malformed percent escape; null when none has. The XML surface's query asks it too.
export function malformedEscapeParameter(query: string): string | null {
  if (!query.includes("%")) return null;
  for (const pair of query.split("&")) {
    const eq = pair.indexOf("=");
    const name = decodeOrNull(eq < 0 ? pair : pair.slice(0, eq));
    if (name === null || (eq >= 0 && decodeOrNull(pair.slice(eq + 1)) === null)) return name ?? "";
  }
  return null;
}

// application/x-www-form-urlencoded's decoding ("+" is a space), or null for a malformed escape.
function decodeOrNull(text: string): string | null {
  try {
    return decodeURIComponent(text.replaceAll("+", " "));
  } catch {
    return null;
  }
}

// grpc-gateway's query mapping: every request field bound neither to the path nor to the body may be given as a
// query parameter, with dotted names for nested fields (page.limit=5) and one parameter per element of a
// repeated field (labels=a&labels=b). The result is JSON in lowerCamel names, ready to merge with the body.
// Fields bound to the path may be repeated here; the path value must then agree (checked by the request builder).
export function queryToJson(route: RestRoute, query: URLSearchParams): JsonObject {
  const grouped = new Map<string, string[]>();
  for (const [name, value] of query) {
    const values = grouped.get(name);
    if (values === undefined) grouped.set(name, [value]);
    else values.push(value);
  }
  const json: JsonObject = {};
  const given = new Map<string, string>();
  for (const [name, values] of grouped) {
    const chain = resolveFieldPath(route.method.input, name);
    if (chain === undefined) {
      throw badRequest("UNKNOWN_FIELD", name, `unknown query parameter ${quoted(name)} for ${route.method.input.typeName}`);
    }
    const top = chain.parents[0] ?? chain.leaf;
    if (isBodyBound(route.body, top.name)) {
      throw badRequest("REQUEST_INVALID", name, "the field is taken from the JSON request body, not the query string");
    }
    if (!isTextField(chain.leaf)) {
      const hint = "the field cannot be set from the query string; send its parts with dotted names";
      throw badRequest("REQUEST_INVALID", name, hint);
    }
    const twin = given.get(chain.jsonPath);
    if (twin !== undefined) throw badRequest("REQUEST_INVALID", name, `the field is also given as "${twin}"`);
    given.set(chain.jsonPath, name);
    const repeated = chain.leaf.fieldKind === "list";
    if (!repeated && values.length > 1) {
      throw badRequest("REQUEST_INVALID", chain.jsonPath, `given ${values.length} times; the field takes one value`);
    }
    const leafValues = values.map((v) => textToJson(chain.leaf, v));
    const target = objectAt(json, chain.parents.map((f) => f.jsonName));
    target[chain.leaf.jsonName] = repeated ? leafValues : (leafValues[0] ?? null);
  }
  return json;
}

function isBodyBound(body: BodyBinding, topField: string): boolean {
  return body.kind === "all" || (body.kind === "field" && body.field.name === topField);
}

// Walks down (creating as needed) the nested objects for page.limit-style names.
function objectAt(root: JsonObject, names: string[]): JsonObject {
  let current = root;
  for (const name of names) {
    const existing: JsonValue | undefined = current[name];
    const next: JsonObject = isJsonObject(existing) ? existing : {};
    current[name] = next;
    current = next;
  }
  return current;
}
