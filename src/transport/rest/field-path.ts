import { ScalarType } from "@bufbuild/protobuf";
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import { hasCustomJsonRepresentation, isWrapperDesc } from "@bufbuild/protobuf/wkt";
import { decodeStrictBase64 } from "../json-base64.js";
import { DECIMAL, INTEGERS } from "../json-misread.js";

export type MessageField = DescField & { fieldKind: "message" };

// A field reached by a dotted path ("page.limit"): the singular message fields on the way, then the leaf.
export interface FieldChain {
  parents: MessageField[];
  leaf: DescField;
  // The path in lowerCamel JSON names, as error details name fields.
  jsonPath: string;
}

const fieldsByName = new WeakMap<DescMessage, Map<string, DescField>>();

// REST callers may use the proto name (key_version_id) or the JSON name (keyVersionId) of a field, as proto-JSON
// parsers accept both.
export function findField(desc: DescMessage, name: string): DescField | undefined {
  let byName = fieldsByName.get(desc);
  if (byName === undefined) {
    byName = new Map();
    for (const f of desc.fields) byName.set(f.name, f).set(f.jsonName, f);
    fieldsByName.set(desc, byName);
  }
  return byName.get(name);
}

// Resolves "a.b.c" through singular message fields. Undefined when a name is unknown or a step goes through a
// repeated, map or scalar field.
export function resolveFieldPath(desc: DescMessage, path: string): FieldChain | undefined {
  const names = path.split(".");
  const parents: MessageField[] = [];
  let current = desc;
  for (let i = 0; i < names.length; i++) {
    const field = findField(current, names[i] ?? "");
    if (field === undefined) return undefined;
    if (i === names.length - 1) {
      return { parents, leaf: field, jsonPath: [...parents, field].map((f) => f.jsonName).join(".") };
    }
    if (field.fieldKind !== "message" || hasCustomJsonRepresentation(field.message)) return undefined;
    parents.push(field);
    current = field.message;
  }
  return undefined;
}

// Well-known types whose JSON form is one string or scalar, so that a path segment or query parameter can carry
// them: Duration "3600s", Timestamp, FieldMask "name,description", and the wrappers.
function isTextMessage(desc: DescMessage): boolean {
  return (
    isWrapperDesc(desc) ||
    desc.typeName === "google.protobuf.Duration" ||
    desc.typeName === "google.protobuf.Timestamp" ||
    desc.typeName === "google.protobuf.FieldMask"
  );
}

// Whether a field (or, for a repeated field, each element) can be written as text in a URL.
export function isTextField(field: DescField): boolean {
  switch (field.fieldKind) {
    case "scalar":
    case "enum":
      return true;
    case "message":
      return isTextMessage(field.message);
    case "list":
      return field.listKind !== "message" || isTextMessage(field.message);
    case "map":
      return false;
  }
}

type JsonLeaf = string | number | boolean | [string];

// Turns URL text into the JSON value proto-JSON expects for the field, so that fromJson applies its rules once for
// body, path and query alike. Text that cannot be converted is passed through unchanged; fromJson then rejects it
// and the caller reports the field.
export function textToJson(field: DescField, text: string): JsonLeaf {
  if (field.enum !== undefined) return /^-?\d+$/.test(text) ? Number(text) : text;
  if (field.message !== undefined) {
    const wrapped = isWrapperDesc(field.message) ? field.message.fields[0] : undefined;
    return wrapped === undefined ? text : textToJson(wrapped, text);
  }
  // An integer of a URL is decimal digits, as grpc-gateway parses it (base 10). proto-JSON also reads "0x10", "0b11",
  // "1e1" and "1.0" as integers (protobuf-es reads the text as Number() does), which gave one key version many paths
  // (/versions/0x1, /versions/1e0): such a text is handed on as a value of no integer's form, refused as any other.
  if (INTEGERS.has(field.scalar) && !DECIMAL.test(text)) return [text];
  // Bytes in a URL are held to the base64 of JSON's bytes (../json-base64.ts) the same way.
  if (field.scalar === ScalarType.BYTES && decodeStrictBase64(text) === undefined) return [text];
  // Numbers stay strings: proto-JSON accepts "3" for every numeric type, and keeps 64-bit values exact.
  if (field.scalar !== ScalarType.BOOL) return text;
  const lower = text.toLowerCase();
  if (lower === "true" || text === "1") return true;
  if (lower === "false" || text === "0") return false;
  return text;
}
