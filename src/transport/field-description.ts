import { ScalarType } from "@bufbuild/protobuf";
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import { isWrapperDesc } from "@bufbuild/protobuf/wkt";

// Says in words what JSON a field takes, for error messages a person can act on. Never quotes the rejected value:
// it may be plaintext or key material.

const scalars: Record<ScalarType, string> = {
  [ScalarType.DOUBLE]: "a number",
  [ScalarType.FLOAT]: "a number",
  [ScalarType.INT64]: "a 64-bit integer (number or decimal string)",
  [ScalarType.UINT64]: "an unsigned 64-bit integer (number or decimal string)",
  [ScalarType.INT32]: "a 32-bit integer (number or decimal string)",
  [ScalarType.FIXED64]: "an unsigned 64-bit integer (number or decimal string)",
  [ScalarType.FIXED32]: "an unsigned 32-bit integer (number or decimal string)",
  [ScalarType.BOOL]: "true or false",
  [ScalarType.STRING]: "a string of valid Unicode (no unpaired surrogate)",
  [ScalarType.BYTES]: "base64-encoded bytes (the standard or the URL-safe alphabet, not both; padding only at the end, or none)",
  [ScalarType.UINT32]: "an unsigned 32-bit integer (number or decimal string)",
  [ScalarType.SFIXED32]: "a 32-bit integer (number or decimal string)",
  [ScalarType.SFIXED64]: "a 64-bit integer (number or decimal string)",
  [ScalarType.SINT32]: "a 32-bit integer (number or decimal string)",
  [ScalarType.SINT64]: "a 64-bit integer (number or decimal string)",
};

const messages: Record<string, string> = {
  "google.protobuf.Duration": 'a duration in seconds with an "s" suffix, e.g. "3600s"',
  "google.protobuf.Timestamp": 'an RFC 3339 timestamp, e.g. "2024-01-31T12:00:00Z"',
  "google.protobuf.FieldMask":
    'a comma-separated list of lowerCamel field names, e.g. "name,rotationPeriod" (in JSON a field mask names fields in lowerCamel; snake_case paths are its binary form)',
  "google.protobuf.Struct": "a JSON object",
  "google.protobuf.ListValue": "a JSON array",
  "google.protobuf.Value": "any JSON value",
};

function describeMessage(desc: DescMessage): string {
  const wrapped = isWrapperDesc(desc) ? desc.fields[0] : undefined;
  if (wrapped?.scalar !== undefined) return scalars[wrapped.scalar];
  return messages[desc.typeName] ?? `a JSON object (${desc.typeName})`;
}

function describeElement(field: DescField): string {
  if (field.enum !== undefined) {
    return `one of ${field.enum.values.map((v) => v.name).join(", ")} (name or number)`;
  }
  if (field.message !== undefined) return describeMessage(field.message);
  return field.scalar === undefined ? "a value" : scalars[field.scalar];
}

// elementOnly: the path points into a repeated field or map ("labels[2]"), so describe one element.
export function describeExpected(field: DescField, elementOnly: boolean): string {
  const element = describeElement(field);
  if (elementOnly) return `expected ${element}`;
  if (field.fieldKind === "list") return `expected a JSON array whose items are each ${element}`;
  if (field.fieldKind === "map") return `expected a JSON object whose values are each ${element}`;
  return `expected ${element}`;
}
