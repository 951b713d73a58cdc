import { isUtf8 } from "node:buffer";
import { equals, fromJson } from "@bufbuild/protobuf";
import type { DescField, DescMessage, JsonObject, JsonValue, Message } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import type { ReflectMessage } from "@bufbuild/protobuf/reflect";
import { quoted } from "../../errors/caller-text.js";
import { smallestBoundOf } from "../../pipeline/message-limits.js";
import { UnknownJsonField, countJson } from "../limits/json-count.js";
import { textToJson } from "./field-path.js";
import type { FieldChain } from "./field-path.js";
import { describeExpected } from "../field-description.js";
import { findMisread, holdsMisreadable } from "../json-misread.js";
import { flatJsonOf } from "./flat-json.js";
import { decodeStrictBase64 } from "../json-base64.js";
import { bytesFieldsOf } from "./json-bytes.js";
import { checkJsonFields, findInvalidValue, isJsonObject, unknownField } from "./json-check.js";
import { duplicateMemberOf } from "./json-duplicates.js";
import { queryToJson } from "./query-params.js";
import { LimitsExceeded, MALFORMED_ESCAPE, badRequest } from "./rest-errors.js";
import type { RestRoute } from "./route-table.js";

export interface RequestParts {
  route: RestRoute;
  // Null for a value with a malformed percent escape.
  pathValues: readonly (string | null)[];
  // Null when the URL has no query string.
  query: URLSearchParams | null;
  body: Uint8Array;
  contentType: string | undefined;
  contentEncoding: string | undefined;
  // The Origin header, which browsers send with every POST (Fetch: "the request's origin" on every request whose
  // method is neither GET nor HEAD) and other clients do not.
  origin: string | undefined;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

// Builds the request message from body, query string and path, in that order, as grpc-gateway does. All JSON is
// converted by one fromJson call so that proto-JSON rules (both field name forms, "1" for int32, URL-safe base64)
// apply exactly as for Connect's JSON; path values are then set field by field and must agree with the body.
export function buildRequestMessage(req: RequestParts): Message {
  const { route } = req;
  const desc = route.method.input;
  const json = bodyToJson(req);
  if (req.query !== null) {
    const query = queryToJson(route, req.query);
    // The query's fields are not the body's: their repeated parameters are counted on their own.
    if (Object.keys(query).length > 0) countElements(route, Buffer.from(JSON.stringify(query)), undefined);
    Object.assign(json, query);
  }
  if (holdsMisreadable(desc)) {
    const misread = findMisread(desc, json, "");
    if (misread !== undefined) throw badRequest("REQUEST_INVALID", misread.path, `invalid value; ${describeExpected(misread.field, misread.path.endsWith("]"))}`);
  }
  // A flat message read whole has only known fields, each once (flat-json.ts): nothing for checkJsonFields to refuse.
  let message = flatJsonOf(desc)?.read(json);
  if (message === undefined) {
    checkJsonFields(desc, json, "");
    message = readJson(desc, json);
  }
  route.pathFields.forEach((chain, i) => {
    const text = req.pathValues[i];
    if (text === null) throw badRequest("REQUEST_INVALID", chain.jsonPath, `invalid value in the URL path; ${MALFORMED_ESCAPE}`);
    setPathValue(message, desc, chain, text ?? "");
  });
  return message;
}

function bodyToJson(req: RequestParts): JsonObject {
  const { body: binding } = req.route;
  const parsed = parseBody(req);
  if (parsed === undefined) {
    // A POST without a body or a JSON content type is a request any web page can make a browser send, with no
    // preflight to ask this server first. A state change (disable, enable, restore ...) is never one of those from
    // a browser. The document's own callers send these calls with no payload at all (its "Payload sent: none"), and
    // with no Origin, which a browser always sends with a POST: such a request is no page's, and is taken as {}.
    const documentsOwn = req.body.length === 0 && req.contentType === undefined && req.origin === undefined;
    if (binding.kind !== "none" && req.route.httpMethod === "POST" && !isJsonContentType(req.contentType) && !documentsOwn) {
      throw badRequest(
        "UNSUPPORTED_CONTENT_TYPE",
        "",
        `a POST must be sent with Content-Type: application/json, even without a body (send {}), not ${req.contentType ?? "none"}`,
      );
    }
    return {};
  }
  if (binding.kind === "field") return { [binding.field.jsonName]: parsed };
  if (!isJsonObject(parsed)) throw badRequest("MALFORMED_BODY", "", "the request body must be a JSON object");
  return parsed;
}

// Undefined for an empty (or all-whitespace) body.
function parseBody(req: RequestParts): JsonValue | undefined {
  if (req.body.length === 0) return undefined;
  // The coding first: compressed bytes are never UTF-8 (nor blank), and a caller who compressed its body must hear
  // that compression is what is refused, not that its body is not text (docs/callers.md).
  const encoding = req.contentEncoding?.trim().toLowerCase();
  if (encoding !== undefined && encoding !== "" && encoding !== "identity") {
    throw badRequest("UNSUPPORTED_CONTENT_TYPE", "", "a request body must be sent uncompressed (no Content-Encoding)");
  }
  // Checked on the bytes, and decoded only once counted: a string of a body of 4 MB took about 10 ms to make, and
  // the count may refuse the body without it.
  if (!isUtf8(req.body)) throw badRequest("MALFORMED_BODY", "", "the request body is not valid UTF-8");
  if (isBlank(req.body)) return undefined;
  if (!isJsonContentType(req.contentType)) {
    throw badRequest(
      "UNSUPPORTED_CONTENT_TYPE",
      "",
      `a request body must be sent with Content-Type: application/json, not ${req.contentType ?? "none"}`,
    );
  }
  const { body: binding } = req.route;
  if (binding.kind === "none") {
    throw badRequest("MALFORMED_BODY", "", "this method takes no request body; send the fields in the query string");
  }
  // Counted before it is parsed: parsing is what a flood of 4 MB costs. A body too short to exceed any limit of its
  // type (smallestBoundOf) is parsed at once, and counted only when it is not JSON, so that a malformed body is
  // refused as before: for its first unknown member, if the count meets one before the text stops being JSON.
  const field = binding.kind === "field" ? binding.field : undefined;
  const small = req.body.length < 2 * (smallestBoundOf(req.route.entry.limits) + 1);
  if (!small) countElements(req.route, req.body, field);
  const text = utf8.decode(req.body);
  let parsed: JsonValue;
  try {
    parsed = JSON.parse(text) as JsonValue;
  } catch {
    if (small) countElements(req.route, req.body, field);
    // The parser's message quotes the input, which may be plaintext; say only what is wrong.
    throw badRequest("MALFORMED_BODY", "", "the request body is not valid JSON");
  }
  const twice = duplicateMemberOf(text);
  if (twice !== undefined) throw badRequest("MALFORMED_BODY", "", `the request body has member ${quoted(twice)} twice in one object`);
  return parsed;
}

// Whether the body is only what String.prototype.trim removes. Most bodies start with an ASCII character that is not
// whitespace, which settles it at once; one that starts otherwise (a byte order mark, U+00A0 ...) is decoded and
// trimmed, as the decoded text would be.
function isBlank(body: Uint8Array): boolean {
  for (const c of body) {
    if (c === 0x20 || (c >= 0x09 && c <= 0x0d)) continue;
    return c < 0x80 ? false : utf8.decode(body).trim() === "";
  }
  return true;
}

// Refuses JSON over the limits of the route's request type: the first unknown member, as checkJsonFields would,
// or the fields with too many elements.
function countElements(route: RestRoute, json: Uint8Array, bodyField: DescField | undefined): void {
  const { limits } = route.entry;
  const field = bodyField === undefined ? undefined : limits.byNumber.get(bodyField.number);
  const counted = countJson(limits, json, { unknownFields: "refuse", field });
  if (counted instanceof UnknownJsonField) throw unknownField(counted.path, counted.name, counted.typeName);
  if (counted !== null) throw new LimitsExceeded(counted);
}

function isJsonContentType(contentType: string | undefined): boolean {
  if (contentType === "application/json") return true;
  return contentType?.split(";", 1)[0]?.trim().toLowerCase() === "application/json";
}

function readJson(desc: DescMessage, json: JsonObject): Message {
  try {
    return readJsonDecodingBytes(desc, json);
  } catch {
    const bad = findInvalidValue(desc, json, "");
    if (bad === undefined) throw badRequest("REQUEST_INVALID", "", `the request does not fit ${desc.typeName}`);
    const expected = describeExpected(bad.field, bad.path.endsWith("]"));
    throw badRequest("REQUEST_INVALID", bad.path, `invalid value; ${expected}`);
  }
}

// fromJson, with the top-level bytes fields decoded natively (../json-base64.ts; a string it refuses was refused
// before, by findMisread) and set after it: the same message, or the same failure, as fromJson alone. fromJson reads them as null (the field's default)
// meanwhile, and the JSON is put back as it was for the error path.
function readJsonDecodingBytes(desc: DescMessage, json: JsonObject): Message {
  let decoded: { key: string; text: string; field: DescField; bytes: Uint8Array }[] | null = null;
  for (const field of bytesFieldsOf(desc)) {
    // One name at most: checkJsonFields refused a field given under both.
    const key = json[field.jsonName] !== undefined ? field.jsonName : field.name;
    const text = json[key];
    const bytes = typeof text === "string" ? decodeStrictBase64(text) : undefined;
    if (bytes === undefined) continue;
    (decoded ??= []).push({ key, text: text as string, field, bytes });
    json[key] = null;
  }
  if (decoded === null) return fromJson(desc, json, { ignoreUnknownFields: false });
  let message: Message;
  try {
    message = fromJson(desc, json, { ignoreUnknownFields: false });
  } finally {
    for (const d of decoded) json[d.key] = d.text;
  }
  for (const d of decoded) (message as unknown as Record<string, unknown>)[d.field.localName] = d.bytes;
  return message;
}

function setPathValue(message: Message, desc: DescMessage, chain: FieldChain, text: string): void {
  let target: ReflectMessage = reflect(desc, message);
  for (const field of chain.parents) {
    const child = target.get(field);
    if (!target.isSet(field)) target.set(field, child);
    target = child;
  }
  const { leaf } = chain;
  let value: unknown;
  try {
    value = reflect(target.desc, fromJson(target.desc, { [leaf.jsonName]: textToJson(leaf, text) })).get(leaf);
  } catch {
    const expected = describeExpected(leaf, false);
    throw badRequest("REQUEST_INVALID", chain.jsonPath, `invalid value in the URL path; ${expected}`);
  }
  if (target.isSet(leaf) && !sameValue(leaf, target.get(leaf), value)) {
    const mismatch = "the value in the request differs from the value in the URL path";
    throw badRequest("FIELD_MISMATCH", chain.jsonPath, mismatch);
  }
  target.set(leaf, value);
}

function sameValue(field: DescField, a: unknown, b: unknown): boolean {
  if (a instanceof Uint8Array && b instanceof Uint8Array) {
    return a.length === b.length && a.every((byte, i) => byte === b[i]);
  }
  if (field.message !== undefined) {
    const [ra, rb] = [a as ReflectMessage, b as ReflectMessage];
    return equals(field.message, ra.message, rb.message);
  }
  return a === b;
}
