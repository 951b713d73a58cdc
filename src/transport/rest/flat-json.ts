import { ScalarType, create } from "@bufbuild/protobuf";
import type { DescField, DescMessage, JsonObject, JsonValue, Message } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence, hasCustomJsonRepresentation } from "@bufbuild/protobuf/wkt";
import { decodeStrictBase64 } from "../json-base64.js";
import { encodeBase64 } from "./json-bytes.js";

// Proto-JSON for "flat" messages, those whose every field is a singular string, bool, 32-bit integer or bytes
// field with implicit presence, outside any oneof: the requests and answers of Encrypt and Decrypt among them.
// protobuf-es reads and writes such a message through its general, reflective code; a REST Encrypt spent more
// there (and in the garbage it leaves) than in JSON.parse (bench/README.md). The reader takes only the plain forms
// (a string, a boolean, an integral number in range, base64 that ../json-base64.ts decodes) and leaves every other
// JSON value to fromJson, which then reads or refuses the whole object as before: the same message or the same
// error. The writer is toJson's output for these types. Both are held to protobuf-es by a property test.

const IMPLICIT = FeatureSet_FieldPresence.IMPLICIT;
const INT32_MIN = -0x80000000;
const INT32_MAX = 0x7fffffff;
const UINT32_MAX = 0xffffffff;
// A lone surrogate is not a valid string; fromJson says so, not this reader.
const SURROGATE = /[\ud800-\udfff]/;

type Kind = "string" | "bool" | "int32" | "uint32" | "bytes";

interface FlatField {
  readonly kind: Kind;
  // The field's bit in a set of the fields read.
  readonly bit: number;
  readonly localName: string;
  readonly jsonName: string;
}

export interface FlatJson {
  // The message for a JSON object, or undefined to leave the object to checkJsonFields and fromJson: any other form
  // of a value, and any unknown or repeated name, which they refuse with their own errors.
  read(json: JsonObject): Message | undefined;
  // The proto-JSON of a message of this type, or of the init object create() would make one of.
  write(message: object): JsonObject;
}

const codecs = new WeakMap<DescMessage, FlatJson | null>();

// The codec of a flat message type, or null for any other; made once per type.
export function flatJsonOf(desc: DescMessage): FlatJson | null {
  let codec = codecs.get(desc);
  if (codec === undefined) {
    codec = makeCodec(desc);
    codecs.set(desc, codec);
  }
  return codec;
}

function kindOf(field: DescField): Kind | undefined {
  if (field.fieldKind !== "scalar" || field.oneof !== undefined || field.presence !== IMPLICIT) return undefined;
  switch (field.scalar) {
    case ScalarType.STRING:
      return "string";
    case ScalarType.BOOL:
      return "bool";
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return "int32";
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return "uint32";
    case ScalarType.BYTES:
      return "bytes";
    default:
      return undefined;
  }
}

function makeCodec(desc: DescMessage): FlatJson | null {
  // Up to 31 fields, so that the fields read are a set of bits in one small integer.
  if (hasCustomJsonRepresentation(desc) || desc.fields.length > 31) return null;
  const fields: FlatField[] = [];
  // Both names of every field, as fromJson reads them.
  const byName = new Map<string, FlatField>();
  for (const field of desc.fields) {
    const kind = kindOf(field);
    if (kind === undefined) return null;
    const flat = { kind, bit: 1 << fields.length, localName: field.localName, jsonName: field.jsonName };
    fields.push(flat);
    byName.set(field.jsonName, flat);
    byName.set(field.name, flat);
  }
  return {
    read(json) {
      const message = create(desc) as unknown as Record<string, unknown>;
      const keys = Object.keys(json);
      let seen = 0;
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]!;
        const field = byName.get(key);
        if (field === undefined) return undefined;
        // A field named twice (proto and JSON name) is fromJson's to refuse.
        if ((seen & field.bit) !== 0) return undefined;
        seen |= field.bit;
        const value = readValue(field.kind, json[key]!);
        if (value === undefined) return undefined;
        if (value !== null) message[field.localName] = value;
      }
      return message as unknown as Message;
    },
    write(message) {
      const source = message as Record<string, unknown>;
      const json: JsonObject = {};
      for (const field of fields) {
        const value = source[field.localName];
        if (value === undefined || value === null) continue;
        switch (field.kind) {
          case "bytes":
            if ((value as Uint8Array).length > 0) json[field.jsonName] = encodeBase64(value as Uint8Array);
            break;
          case "string":
            if (value !== "") json[field.jsonName] = value as string;
            break;
          case "bool":
            if (value !== false) json[field.jsonName] = value as boolean;
            break;
          default:
            if (value !== 0) json[field.jsonName] = value as number;
        }
      }
      return json;
    },
  };
}

// The field's value for a plain JSON value; null for JSON null (the field stays at its zero value, as fromJson
// leaves it); undefined for any other form.
function readValue(kind: Kind, value: JsonValue): unknown {
  if (value === null) return null;
  switch (kind) {
    case "string":
      return typeof value === "string" && !SURROGATE.test(value) ? value : undefined;
    case "bool":
      return typeof value === "boolean" ? value : undefined;
    case "int32":
      return typeof value === "number" && Number.isInteger(value) && value >= INT32_MIN && value <= INT32_MAX ? value : undefined;
    case "uint32":
      return typeof value === "number" && Number.isInteger(value) && value >= 0 && value <= UINT32_MAX ? value : undefined;
    case "bytes":
      return typeof value === "string" ? decodeStrictBase64(value) : undefined;
  }
}
