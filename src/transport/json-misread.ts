import { ScalarType } from "@bufbuild/protobuf";
import type { DescField, DescMessage, JsonValue } from "@bufbuild/protobuf";
import { isImpossibleTimestamp } from "../shared/rfc3339.js";
import { decodeStrictBase64 } from "./json-base64.js";

// Values of a JSON request that protobuf-es would read as another value than the one written, found before the
// request is decoded, for REST and for Connect's JSON forms alike (probes, 2026-11-27 and 2026-11-28):
// - a google.protobuf.Timestamp text of RFC 3339's shape that names no moment: protobuf-es reads it with Date.parse,
//   which rolled "2027-02-30T00:00:00Z" over into March 2 and "2027-01-01T24:00:00Z" into the next day, while month
//   13 was refused. RFC 3339 (5.7) bounds the day by its month and the hour by 23.
// - an integer written as a string that is not decimal digits: protobuf-es reads it as Number() does, so "0x1",
//   "0b1", "1e0" and "1.0" were version 1. proto3's JSON takes an integer as a number or a decimal string, and the
//   path and query of a REST URL are held to decimal digits already (rest/field-path.ts).
// - bytes (a bytes field or a google.protobuf.BytesValue) that are not base64 in one of its two forms: protobuf-es
//   skips what it does not expect, so "aGk=aGk=" was "hihi" and an AAD of " " none at all (json-base64.ts).
// A value of any other form is left to protobuf-es, which refuses or reads it as before.

export const INTEGERS = new Set<ScalarType | undefined>([
  ScalarType.INT32,
  ScalarType.INT64,
  ScalarType.UINT32,
  ScalarType.UINT64,
  ScalarType.SINT32,
  ScalarType.SINT64,
  ScalarType.FIXED32,
  ScalarType.FIXED64,
  ScalarType.SFIXED32,
  ScalarType.SFIXED64,
]);
export const DECIMAL = /^-?[0-9]+$/;

const TIMESTAMP = "google.protobuf.Timestamp";
const BYTES_VALUE = "google.protobuf.BytesValue";

const holding = new WeakMap<DescMessage, boolean>();

// Whether a request of this type can hold such a value at all, in a field, a list or a map, at any depth: an
// integer, bytes or a Timestamp. Types that cannot are not walked.
export function holdsMisreadable(desc: DescMessage, visiting = new Set<DescMessage>()): boolean {
  const known = holding.get(desc);
  if (known !== undefined) return known;
  if (desc.typeName === TIMESTAMP || desc.typeName === BYTES_VALUE) return true;
  if (visiting.has(desc)) return false;
  visiting.add(desc);
  const found = desc.fields.some((f) => isChecked(f.scalar) || (f.message !== undefined && holdsMisreadable(f.message, visiting)));
  visiting.delete(desc);
  holding.set(desc, found);
  return found;
}

export interface Misread {
  field: DescField;
  // The value's JSON path as the caller wrote its names, an element's with its index or key ("labels[1]").
  path: string;
}

const checked = new WeakMap<DescMessage, Map<string, DescField>>();

// The fields of the type that can hold such a value, by JSON name and by proto name; made once per type.
function checkedFieldsOf(desc: DescMessage): Map<string, DescField> {
  let fields = checked.get(desc);
  if (fields === undefined) {
    fields = new Map();
    for (const f of desc.fields) {
      if (!isChecked(f.scalar) && (f.message === undefined || !holdsMisreadable(f.message))) continue;
      fields.set(f.jsonName, f);
      fields.set(f.name, f);
    }
    checked.set(desc, fields);
  }
  return fields;
}

// The first value in `json`, a request of type `desc`, that protobuf-es would misread; undefined when none. It runs on
// every REST and Connect JSON request of such a type (an Encrypt's keyVersionId): a Map lookup per member.
export function findMisread(desc: DescMessage, json: JsonValue, path: string): Misread | undefined {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return undefined;
  const fields = checkedFieldsOf(desc);
  if (fields.size === 0) return undefined;
  for (const key in json) {
    const field = fields.get(key);
    const value = json[key];
    if (field === undefined || value === null || value === undefined) continue;
    const at = path === "" ? key : `${path}.${key}`;
    if (field.fieldKind === "list" && Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const found = misreadIn(field, value[i]!, `${at}[${i}]`);
        if (found !== undefined) return found;
      }
    } else if (field.fieldKind === "map" && typeof value === "object" && !Array.isArray(value)) {
      for (const k in value) {
        const found = misreadIn(field, value[k]!, `${at}[${JSON.stringify(k)}]`);
        if (found !== undefined) return found;
      }
    } else {
      const found = misreadIn(field, value, at);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

function isChecked(scalar: ScalarType | undefined): boolean {
  return INTEGERS.has(scalar) || scalar === ScalarType.BYTES;
}

function misreadIn(field: DescField, value: JsonValue, path: string): Misread | undefined {
  if (INTEGERS.has(field.scalar)) return typeof value === "string" && !DECIMAL.test(value) ? { field, path } : undefined;
  if (field.scalar === ScalarType.BYTES) return typeof value === "string" && decodeStrictBase64(value) === undefined ? { field, path } : undefined;
  const message = field.message!;
  if (message.typeName === TIMESTAMP) return typeof value === "string" && isImpossibleTimestamp(value) ? { field, path } : undefined;
  if (message.typeName === BYTES_VALUE) return typeof value === "string" && decodeStrictBase64(value) === undefined ? { field, path } : undefined;
  return findMisread(message, value, path);
}
