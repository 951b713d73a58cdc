import { fromJson } from "@bufbuild/protobuf";
import type { DescField, DescMessage, JsonObject, JsonValue } from "@bufbuild/protobuf";
import { hasCustomJsonRepresentation } from "@bufbuild/protobuf/wkt";
import { unknownFieldDescription } from "../../errors/protocol-errors.js";
import { findField } from "./field-path.js";
import { badRequest } from "./rest-errors.js";
import type { BadRequest } from "./rest-errors.js";

// protobuf-es reports what is wrong in a JSON request only by the fully qualified name of a field, and its
// message may quote the offending value (which can be plaintext or key material). These walks over the JSON, led
// by the descriptors, find the exact JSON path instead, and the caller writes its own description.

export function isJsonObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

type Child = [DescMessage, JsonObject, string];

// The children of a field that are themselves messages with fields of their own, with their JSON paths.
function* childMessages(field: DescField, value: JsonValue, path: string): Generator<Child> {
  const desc = field.message;
  if (desc === undefined || hasCustomJsonRepresentation(desc)) return;
  if (field.fieldKind === "message" && isJsonObject(value)) yield [desc, value, path];
  if (field.fieldKind === "list" && Array.isArray(value)) {
    for (const [i, item] of value.entries()) if (isJsonObject(item)) yield [desc, item, `${path}[${i}]`];
  }
  if (field.fieldKind === "map" && isJsonObject(value)) {
    for (const [key, item] of Object.entries(value)) if (isJsonObject(item)) yield [desc, item, mapPath(path, key)];
  }
}

function mapPath(path: string, key: string): string {
  return `${path}[${JSON.stringify(key)}]`;
}

function join(path: string, name: string): string {
  return path === "" ? name : `${path}.${name}`;
}

// A member of a request object that its message does not have, named by its JSON path.
export function unknownField(path: string, name: string, typeName: string): BadRequest {
  return badRequest("UNKNOWN_FIELD", path, unknownFieldDescription(name, typeName));
}

// Throws INVALID_ARGUMENT UNKNOWN_FIELD for the first name the message does not have, and REQUEST_INVALID for a
// field given twice (proto and JSON name) or two members of one oneof. Paths use the names as the caller wrote them.
export function checkJsonFields(desc: DescMessage, json: JsonObject, path: string): void {
  // Made only when needed, as this runs on every REST request: two names of one field need a proto name among
  // them (JSON object keys are distinct, and so are the fields of distinct JSON names), so `seen` starts at the
  // first key that is not a JSON name, with the keys before it.
  let seen: Map<DescField, string> | null = null;
  let oneofs: Map<string, string> | null = null;
  // Keys, not entries: the walk stops at the first unknown name, and for a body of 100,000 unknown members
  // Object.entries alone took 70-100 ms, three times Object.keys.
  const keys = Object.keys(json);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const value = json[key] ?? null;
    const field = findField(desc, key);
    if (field === undefined) throw unknownField(join(path, key), key, desc.typeName);
    if (seen === null && key !== field.jsonName) {
      seen = new Map();
      for (let j = 0; j < i; j++) seen.set(findField(desc, keys[j]!)!, keys[j]!);
    }
    if (seen !== null) {
      const twin = seen.get(field);
      if (twin !== undefined) throw badRequest("REQUEST_INVALID", join(path, key), `the field is also given as "${twin}"`);
      seen.set(field, key);
    }
    if (field.oneof !== undefined && value !== null) {
      oneofs ??= new Map();
      const other = oneofs.get(field.oneof.name);
      if (other !== undefined) {
        throw badRequest("REQUEST_INVALID", join(path, key), `only one of "${other}" and "${key}" may be set`);
      }
      oneofs.set(field.oneof.name, key);
    }
    if (field.message === undefined) continue;
    for (const [child, obj, childPath] of childMessages(field, value, join(path, key))) checkJsonFields(child, obj, childPath);
  }
}

function readable(desc: DescMessage, key: string, value: JsonValue): boolean {
  try {
    fromJson(desc, { [key]: value });
    return true;
  } catch {
    return false;
  }
}

// The index of the first element of a list that cannot be read, found by halving: about as much work as reading
// the list twice, where reading each element on its own cost a fromJson call per element (a third of a second
// for 460,000 labels). Undefined when every element can be read.
function firstUnreadable(desc: DescMessage, key: string, items: JsonValue[]): number | undefined {
  // items[0, low) can be read; if any element cannot, one of items[low, high) cannot.
  let low = 0;
  let high = items.length;
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (readable(desc, key, items.slice(low, middle))) low = middle;
    else high = middle;
  }
  return readable(desc, key, items.slice(low, high)) ? undefined : low;
}

export interface InvalidValue {
  path: string;
  field: DescField;
}

// After fromJson rejected a request whose names checkJsonFields accepted: narrows the failure down to the
// innermost field or element that cannot be read. Runs on the error path only.
export function findInvalidValue(desc: DescMessage, json: JsonObject, path: string): InvalidValue | undefined {
  for (const [key, value] of Object.entries(json)) {
    const field = findField(desc, key);
    if (field === undefined || readable(desc, key, value)) continue;
    const at = join(path, key);
    for (const [child, obj, childPath] of childMessages(field, value, at)) {
      const inner = findInvalidValue(child, obj, childPath);
      if (inner !== undefined) return inner;
    }
    if (field.fieldKind === "list" && Array.isArray(value)) {
      const i = firstUnreadable(desc, key, value);
      if (i !== undefined) return { path: `${at}[${i}]`, field };
    }
    if (field.fieldKind === "map" && isJsonObject(value)) {
      const bad = Object.entries(value).find(([k, v]) => !readable(desc, key, { [k]: v }));
      if (bad !== undefined) return { path: mapPath(at, bad[0]), field };
    }
    return { path: at, field };
  }
  return undefined;
}
