import { create, toJson } from "@bufbuild/protobuf";
import type { DescField, DescMessage, JsonObject, JsonValue, Message } from "@bufbuild/protobuf";
import { isReflectList, isReflectMap, reflect } from "@bufbuild/protobuf/reflect";
import type { ReflectMessage } from "@bufbuild/protobuf/reflect";
import { base64Encode } from "@bufbuild/protobuf/wire";
import type { Any } from "@bufbuild/protobuf/wkt";
import { bytesFieldsOf, encodeBase64 } from "./json-bytes.js";

// On the REST surface every google.protobuf.Any is written as {"typeUrl", "value"} with the packed bytes in
// standard base64 (CONTRACT section 3), not as canonical proto-JSON's {"@type", ...fields}, which also would need
// every packed type in a registry. Everything else is canonical proto3 JSON from toJson, but for top-level bytes
// fields, which are written here with Node's base64 (json-bytes.ts), to the same text.

const ANY = "google.protobuf.Any";

export function anyToRestJson(any: Pick<Any, "typeUrl" | "value">): JsonObject {
  // Fields at their default are omitted, as for any other message.
  const json: JsonObject = {};
  if (any.typeUrl !== "") json["typeUrl"] = any.typeUrl;
  if (any.value.length > 0) json["value"] = base64Encode(any.value, "std");
  return json;
}

export function toRestJson(desc: DescMessage, message: Message): JsonValue {
  if (desc.typeName === ANY) return anyToRestJson(message as Any);
  const special = specialFieldsOf(desc);
  if (special.size === 0) return toJson(desc, message);
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

// The fields of a message rendered here: those whose type is, or transitively contains, an Any, and its plain
// bytes fields. Computed once per message type.
function specialFieldsOf(desc: DescMessage): Set<DescField> {
  let fields = specialFields.get(desc);
  if (fields === undefined) {
    fields = new Set([
      ...desc.fields.filter((f) => f.message !== undefined && reachesAny(f.message)),
      ...bytesFieldsOf(desc).values(),
    ]);
    specialFields.set(desc, fields);
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
