import { create, toJson } from "@bufbuild/protobuf";
import type { DescField, DescMessage, JsonObject, JsonValue, Message } from "@bufbuild/protobuf";
import { isReflectList, isReflectMap, reflect } from "@bufbuild/protobuf/reflect";
import type { ReflectMessage } from "@bufbuild/protobuf/reflect";
import { base64Encode } from "@bufbuild/protobuf/wire";
import type { Any } from "@bufbuild/protobuf/wkt";

// On the REST surface every google.protobuf.Any is written as {"typeUrl", "value"} with the packed bytes in
// standard base64 (CONTRACT section 3), not as canonical proto-JSON's {"@type", ...fields}, which also would need
// every packed type in a registry. Everything else is canonical proto3 JSON from toJson.

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
  const special = fieldsReachingAny(desc);
  if (special.size === 0) return toJson(desc, message);
  // toJson renders a copy without the fields that lead to an Any; those are rendered here, recursively, and
  // merged back in declaration order, the order toJson uses.
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

// A special field always holds messages: one, a list of them, or a map to them.
function fieldToRestJson(field: DescField, source: ReflectMessage): JsonValue {
  const value = source.get(field);
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

const reachingAny = new WeakMap<DescMessage, Set<DescField>>();

// The fields of a message whose type is, or transitively contains, an Any. Computed once per message type.
function fieldsReachingAny(desc: DescMessage): Set<DescField> {
  let fields = reachingAny.get(desc);
  if (fields === undefined) {
    fields = new Set(desc.fields.filter((f) => f.message !== undefined && reachesAny(f.message)));
    reachingAny.set(desc, fields);
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
