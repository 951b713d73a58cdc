import { ScalarType } from "@bufbuild/protobuf";
import type { DescField, DescMessage, Message } from "@bufbuild/protobuf";

// Reads a string field of a request by its proto path ("parent_id", "key.id"), resolved against the descriptor
// once at start-up: the stages read the scope of a call and the ids of its resource with it.
export type FieldReader = (request: Message) => string;

// Throws at start-up when the path does not name a string field of the message.
export function stringFieldReader(desc: DescMessage, path: string): FieldReader {
  const names: string[] = [];
  let current: DescMessage = desc;
  const parts = path.split(".");
  parts.forEach((part, i) => {
    const field = current.fields.find((f) => f.name === part);
    if (field === undefined) throw new Error(`${desc.typeName} has no field "${path}"`);
    names.push(field.localName);
    if (i < parts.length - 1) {
      if (field.fieldKind !== "message") throw new Error(`${desc.typeName}: "${parts.slice(0, i + 1).join(".")}" is not a message field`);
      current = field.message;
    } else if (field.fieldKind !== "scalar" || field.scalar !== ScalarType.STRING) {
      throw new Error(`${desc.typeName}: "${path}" is not a string field`);
    }
  });
  if (names.length === 1) {
    const name = names[0]!;
    return (request) => ((request as unknown as Record<string, unknown>)[name] as string | undefined) ?? "";
  }
  return (request) => {
    let value: unknown = request;
    for (const name of names) value = (value as Record<string, unknown> | undefined)?.[name];
    return typeof value === "string" ? value : "";
  };
}

// The longest text the audit trail keeps of what a call names (its scope, its resource): valid ids are at most 128
// characters, so every valid scope and resource fits whole; a longer one is an invalid request's, cut.
export const MAX_NAMED_CHARS = 256;

// The resource a call names, as its REST path with the request's values in place of the template's variables
// ("/v1/keys/{key_id}/versions/{key_version_id}" -> "/v1/keys/k1/versions/2"); for the audit trail. Each value is
// written as a REST URL carries it (`encodePathSegment`): the values are the caller's, not yet validated, and raw, a
// key id "<another key>/versions/1" made the very path of a call on that other key (docs/access.md, "Audit trail").
// A path longer than `max` is cut there (never inside a %XX) and says how long it was: "...(N characters)". Only
// what is kept is encoded: a 4 MB id of non-ASCII characters took 0.1 s to encode whole.
// A variable of more than one segment ("{name=shelves/*/items/*}") keeps the "/" of a value that fits its pattern,
// each segment encoded; a value that does not fit is encoded whole, as one segment.
export function resourcePathOf(desc: DescMessage, template: string, max = MAX_NAMED_CHARS): (request: Message) => string {
  const pieces: (string | ((request: Message) => string | string[]))[] = [];
  let rest = template;
  for (let open = rest.indexOf("{"); open >= 0; open = rest.indexOf("{")) {
    const close = rest.indexOf("}", open);
    if (close < 0) break;
    pieces.push(rest.slice(0, open));
    const [variable, pattern] = rest.slice(open + 1, close).split("=");
    const read = anyFieldReader(desc, variable!);
    const segments = pattern === undefined || pattern === "*" ? null : pattern.split("/");
    pieces.push(segments === null ? read : (request) => fitted(read(request), segments));
    rest = rest.slice(close + 1);
  }
  pieces.push(rest);
  return (request) => {
    let path = "";
    // The length of the whole path, encoded.
    let length = 0;
    for (const piece of pieces) {
      if (typeof piece === "string") {
        path += piece;
        length += piece.length;
        continue;
      }
      const value = piece(request);
      if (Array.isArray(value)) {
        // A multi-segment value that fits its pattern: its segments, short, as valid ids are.
        const encoded = value.map(encodePathSegment).join("/");
        path += path.length > max ? "" : encoded;
        length += encoded.length;
        continue;
      }
      // Every character encodes to at least one: no more than `max` of them can be kept.
      const head = value.length <= max ? value : value.slice(0, /[\uD800-\uDBFF]/.test(value.charAt(max - 1)) ? max - 1 : max);
      const encoded = path.length > max ? "" : encodePathSegment(head);
      path += encoded;
      length += head === value && encoded !== "" ? encoded.length : encodedLength(value);
    }
    if (length <= max) return path;
    // Not inside a %XX escape.
    const end = path.charAt(max - 1) === "%" ? max - 1 : path.charAt(max - 2) === "%" ? max - 2 : max;
    return `${path.slice(0, end)}...(${length} characters)`;
  };
}

// The segments of a value that fits the pattern of a multi-segment variable: literal segments as written, "*" one
// non-empty segment, "**" (last) the rest; else the value itself, to be encoded as one segment.
function fitted(value: string, pattern: readonly string[]): string | string[] {
  // Longer than any valid name: encoded as one segment, and cut.
  if (value.length > MAX_NAMED_CHARS) return value;
  const segments = value.split("/");
  const rest = pattern.at(-1) === "**";
  const fixed = rest ? pattern.length - 1 : pattern.length;
  if (rest ? segments.length < fixed : segments.length !== fixed) return value;
  for (let i = 0; i < segments.length; i++) {
    const want = pattern[Math.min(i, pattern.length - 1)]!;
    if (segments[i] === "" || (want !== "*" && want !== "**" && segments[i] !== want)) return value;
  }
  return segments;
}

// How long encodePathSegment(value) is, without making it.
function encodedLength(value: string): number {
  if (value === "." || value === "..") return value.length * 3;
  let length = 0;
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    if (unit < 0x80) length += isUnreserved(unit) ? 1 : 3;
    else if (unit < 0x800) length += 6;
    // A pair: four bytes for its two units; a lone surrogate: three, as any other unit up to U+FFFF.
    else if (unit >= 0xd800 && unit <= 0xdbff && isLowSurrogate(value.charCodeAt(i + 1))) {
      length += 12;
      i++;
    } else length += 9;
  }
  return length;
}

function isUnreserved(unit: number): boolean {
  return (unit >= 0x30 && unit <= 0x39) || (unit >= 0x41 && unit <= 0x5a) || (unit >= 0x61 && unit <= 0x7a) || unit === 0x2d || unit === 0x2e || unit === 0x5f || unit === 0x7e;
}

function isLowSurrogate(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}

// RFC 3986's unreserved characters: google.api.http leaves exactly these of a one-segment variable as they are when
// it puts a value in a URL, and percent-encodes every other. Every id the server makes or accepts (key ids, UUIDs,
// catalog ids, namespaces) is made of them only, so a real resource's path is what it was before values were encoded.
const UNRESERVED = /^[A-Za-z0-9._~-]*$/;
// What encodeURIComponent leaves as it is beside the unreserved characters.
const SUB_DELIMS_LEFT = /[!'()*]/g;
// A lone surrogate: encodeURIComponent throws on one.
const LONE_SURROGATE = /\p{Cs}/u;

// One path segment of a REST URL that names the value, as google.api.http writes a one-segment variable: every
// character but [A-Za-z0-9._~-] as the percent-encoded bytes of its UTF-8 ("/" as %2F, "%" as %25, "?" as %3F, ":"
// as %3A, "é" as %C3%A9), so that no value makes a "/", a custom verb, a query or a fragment, nor a path another
// value makes. Beyond google.api.http, a value that is "." or ".." is written %2E or %2E%2E, as a URL must carry it
// (a client or proxy drops a "." segment and a ".." with the one before it); no id is either. A lone surrogate,
// which UTF-8 cannot encode, is written as the three bytes WTF-8 gives it (U+D800 as %ED%A0%80), which no character
// of a well-formed string encodes to. So two values never give one segment.
export function encodePathSegment(value: string): string {
  if (value === ".") return "%2E";
  if (value === "..") return "%2E%2E";
  if (UNRESERVED.test(value)) return value;
  let encoded: string;
  if (!LONE_SURROGATE.test(value)) {
    encoded = encodeURIComponent(value);
  } else {
    encoded = "";
    for (const ch of value) encoded += ch.length === 1 && LONE_SURROGATE.test(ch) ? wtf8(ch.charCodeAt(0)) : encodeURIComponent(ch);
  }
  return encoded.replace(SUB_DELIMS_LEFT, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function wtf8(unit: number): string {
  const bytes = [0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)];
  return bytes.map((b) => `%${b.toString(16).toUpperCase()}`).join("");
}

// Path variables may be numbers (key_version_id): read any scalar as text.
function anyFieldReader(desc: DescMessage, path: string): (request: Message) => string {
  const names: string[] = [];
  let current: DescMessage | undefined = desc;
  for (const part of path.split(".")) {
    const field: DescField | undefined = current?.fields.find((f) => f.name === part);
    if (field === undefined) throw new Error(`${desc.typeName} has no field "${path}"`);
    names.push(field.localName);
    current = field.fieldKind === "message" ? field.message : undefined;
  }
  return (request) => {
    let value: unknown = request;
    for (const name of names) value = (value as Record<string, unknown> | undefined)?.[name];
    return typeof value === "string" || typeof value === "number" || typeof value === "bigint" ? String(value) : "";
  };
}
