import { create, toJson } from "@bufbuild/protobuf";
import type { DescField, DescMessage, JsonObject, JsonValue, Message } from "@bufbuild/protobuf";
import { isReflectList, isReflectMap, reflect } from "@bufbuild/protobuf/reflect";
import type { ReflectMessage } from "@bufbuild/protobuf/reflect";
import type { Any } from "@bufbuild/protobuf/wkt";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import { flatJsonOf } from "./flat-json.js";
import { bytesFieldsOf, encodeBase64 } from "./json-bytes.js";

// On the REST surface every google.protobuf.Any is written as {"typeUrl", "value"} with the packed bytes in
// standard base64 (CONTRACT section 3), not as canonical proto-JSON's {"@type", ...fields}, which also would need
// every packed type in a registry. Everything else is canonical proto3 JSON from toJson, but for top-level bytes
// fields, which are written here with Node's base64 (json-bytes.ts), to the same text.

const ANY = "google.protobuf.Any";

// The same for what a handler returned: a message of the type or the init object of one. A flat message is written
// from it as it is, without making the message first.
export function resultToRestJson(desc: DescMessage, result: unknown): JsonValue {
  const flat = flatJsonOf(desc);
  if (flat !== null) return flat.write(result as object);
  return toRestJson(desc, create(desc, result as never));
}

export function anyToRestJson(any: Pick<Any, "typeUrl" | "value">): JsonObject {
  // Fields at their default are omitted, as for any other message.
  const json: JsonObject = {};
  if (any.typeUrl !== "") json["typeUrl"] = any.typeUrl;
  if (any.value.length > 0) json["value"] = encodeBase64(any.value);
  return json;
}

export function toRestJson(desc: DescMessage, message: Message): JsonValue {
  if (desc.typeName === ANY) return anyToRestJson(message as Any);
  const flat = flatJsonOf(desc);
  if (flat !== null) return flat.write(message);
  const special = specialFieldsOf(desc);
  if (special.size === 0) return toJson(desc, message);
  if (special === bytesOnly.get(desc) && Object.getPrototypeOf(message) === Object.prototype) return withBytes(desc, message, special);
  // toJson renders a copy without the fields that lead to an Any and the bytes fields; those are rendered here
  // (recursively for an Any) and merged back in declaration order, the order toJson uses.
  const source = reflect(desc, message);
  const copy = reflect(desc, create(desc));
  for (const field of desc.fields) {
    if (!special.has(field) && source.isSet(field)) copy.set(field, source.get(field));
  }
  const plain = toJson(desc, copy.message) as JsonObject;
  const json: JsonObject = {};
  for (const field of desc.fields) {
    if (special.has(field)) {
      if (source.isSet(field)) json[field.jsonName] = fieldToRestJson(field, source);
    } else {
      const value = plain[field.jsonName];
      if (value !== undefined) json[field.jsonName] = value;
    }
  }
  return json;
}

// The same for a message whose only special fields are bytes and that is a plain object (proto3: no defaults on
// a prototype), without the reflection API: toJson renders a shallow copy with those fields at their zero value.
// The path of every Encrypt and Decrypt response.
function withBytes(desc: DescMessage, message: Message, special: Set<DescField>): JsonObject {
  const source = message as unknown as Record<string, unknown>;
  const copy: Record<string, unknown> = { ...source };
  for (const field of special) copy[field.localName] = field.presence === IMPLICIT ? NO_BYTES : undefined;
  const plain = toJson(desc, copy as unknown as Message) as JsonObject;
  const json: JsonObject = {};
  for (const field of desc.fields) {
    if (special.has(field)) {
      const value = source[field.localName] as Uint8Array | undefined;
      // Set as the reflection API says (unsafeIsSet): present if not empty, or, with explicit presence, if given.
      const set = field.presence === IMPLICIT ? value !== undefined && value.length > 0 : value !== undefined && Object.hasOwn(source, field.localName);
      if (set) json[field.jsonName] = encodeBase64(value!);
    } else {
      const value = plain[field.jsonName];
      if (value !== undefined) json[field.jsonName] = value;
    }
  }
  return json;
}

// A special field holds bytes, or messages: one, a list of them, or a map to them.
function fieldToRestJson(field: DescField, source: ReflectMessage): JsonValue {
  const value = source.get(field);
  if (field.fieldKind === "scalar") return encodeBase64(value as Uint8Array);
  const render = (item: unknown): JsonValue => {
    const msg = item as ReflectMessage;
    return toRestJson(msg.desc, msg.message);
  };
  if (isReflectList(value)) return Array.from(value, render);
  if (isReflectMap(value)) {
    const json: JsonObject = {};
    for (const [key, item] of value) json[String(key)] = render(item);
    return json;
  }
  return render(value);
}

const specialFields = new WeakMap<DescMessage, Set<DescField>>();
// The sets of specialFields that hold bytes fields only.
const bytesOnly = new WeakMap<DescMessage, Set<DescField>>();
const IMPLICIT = FeatureSet_FieldPresence.IMPLICIT;
const NO_BYTES = new Uint8Array(0);

// The fields of a message rendered here: those whose type is, or transitively contains, an Any, and its plain
// bytes fields. Computed once per message type.
function specialFieldsOf(desc: DescMessage): Set<DescField> {
  let fields = specialFields.get(desc);
  if (fields === undefined) {
    const anys = desc.fields.filter((f) => f.message !== undefined && reachesAny(f.message));
    fields = new Set([...anys, ...bytesFieldsOf(desc)]);
    specialFields.set(desc, fields);
    if (anys.length === 0) bytesOnly.set(desc, fields);
  }
  return fields;
}

// Plain reachability over message types, safe for recursive types.
function reachesAny(start: DescMessage): boolean {
  const seen = new Set<DescMessage>([start]);
  const queue = [start];
  for (let desc = queue.pop(); desc !== undefined; desc = queue.pop()) {
    if (desc.typeName === ANY) return true;
    for (const f of desc.fields) {
      if (f.message !== undefined && !seen.has(f.message)) {
        seen.add(f.message);
        queue.push(f.message);
      }
    }
  }
  return false;
}
