import { ScalarType, getOption } from "@bufbuild/protobuf";
import type { DescEnum, DescField, DescMessage } from "@bufbuild/protobuf";
import { field_behavior } from "../../gen/google/api/field_behavior_pb.js";
import { FieldBehavior } from "../../gen/google/api/field_behavior_pb.js";
import { describe } from "./comments.js";

// JSON Schema (the dialect of OpenAPI 3.1) of proto3 JSON as the REST surface reads and writes it (CONTRACT
// section 3): lowerCamel names (json_name where set), enums by name, 64-bit integers as strings, bytes as base64,
// the well-known types in their JSON forms, and google.protobuf.Any as {"typeUrl", "value"}.


// Whether the field's (google.api.field_behavior) says REQUIRED.
export function isRequired(field: DescField): boolean {
  return getOption(field, field_behavior).includes(FieldBehavior.REQUIRED);
}

export type Schema = { [key: string]: unknown };

// Every message schema one document refers to, by full name, filled as they are first referred to.
export class SchemaSet {
  readonly schemas = new Map<string, Schema>();

  ref(message: DescMessage): Schema {
    const wkt = wellKnown(message);
    if (wkt !== undefined) return wkt;
    if (!this.schemas.has(message.typeName)) {
      // Placed first, so that a message that contains itself refers to its own entry.
      this.schemas.set(message.typeName, {});
      this.schemas.set(message.typeName, this.object(message, () => true));
    }
    return { $ref: `#/components/schemas/${message.typeName}` };
  }

  // The schema of a message's fields that `keep` admits (a request body without its path fields).
  object(message: DescMessage, keep: (field: DescField) => boolean): Schema {
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    for (const field of message.fields) {
      if (!keep(field)) continue;
      const behaviors = getOption(field, field_behavior);
      properties[field.jsonName] = withDescription(this.field(field), describe(field), behaviors);
      if (isRequired(field)) required.push(field.jsonName);
    }
    const schema: Schema = { type: "object", properties, additionalProperties: false };
    if (required.length > 0) schema["required"] = required;
    const text = describe(message);
    if (text !== undefined) schema["description"] = text;
    return schema;
  }

  field(field: DescField): Schema {
    switch (field.fieldKind) {
      case "scalar":
        return scalar(field.scalar);
      case "enum":
        return enumSchema(field.enum);
      case "message":
        return this.ref(field.message);
      case "list":
        return {
          type: "array",
          items: field.listKind === "scalar" ? scalar(field.scalar) : field.listKind === "enum" ? enumSchema(field.enum) : this.ref(field.message),
        };
      case "map":
        return {
          type: "object",
          additionalProperties: field.mapKind === "scalar" ? scalar(field.scalar) : field.mapKind === "enum" ? enumSchema(field.enum) : this.ref(field.message),
        };
    }
  }
}

function withDescription(schema: Schema, text: string | undefined, behaviors: FieldBehavior[]): Schema {
  const out: Schema = "$ref" in schema ? { $ref: schema["$ref"] } : { ...schema };
  if (text !== undefined) out["description"] = text;
  if (behaviors.includes(FieldBehavior.OUTPUT_ONLY)) out["readOnly"] = true;
  if (behaviors.includes(FieldBehavior.INPUT_ONLY)) out["writeOnly"] = true;
  return out;
}

export function scalar(type: ScalarType): Schema {
  switch (type) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.BYTES:
      return { type: "string", format: "byte", contentEncoding: "base64" };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: "number" };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: "integer", format: "int32" };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", format: "int32", minimum: 0 };
    // proto3 JSON writes 64-bit integers as decimal strings and reads numbers too.
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return { type: ["string", "integer"], format: "int64" };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { type: ["string", "integer"], format: "uint64" };
  }
}

// Written by name; a request may also give the number.
function enumSchema(desc: DescEnum): Schema {
  const lines = desc.values.map((v) => `- ${v.name}${describe(v) === undefined ? "" : `: ${describe(v)}`}`);
  const text = describe(desc);
  return {
    type: "string",
    enum: desc.values.map((v) => v.name),
    description: [text ?? desc.name, ...lines].join("\n"),
  };
}

// The JSON forms of the well-known types the API uses; undefined for every other message.
function wellKnown(message: DescMessage): Schema | undefined {
  switch (message.typeName) {
    case "google.protobuf.Timestamp":
      return { type: "string", format: "date-time", description: "RFC 3339, UTC (\"2026-11-23T10:00:00Z\")" };
    case "google.protobuf.Duration":
      return { type: "string", pattern: "^-?[0-9]+(\\.[0-9]{1,9})?s$", description: "Seconds with an \"s\" suffix (\"86400s\")" };
    case "google.protobuf.FieldMask":
      return { type: "string", description: "Comma-separated lowerCamel field paths (\"name,description\")" };
    case "google.protobuf.Empty":
      return { type: "object", additionalProperties: false };
    case "google.protobuf.Any":
      return { $ref: "#/components/schemas/google.protobuf.Any" };
    case "google.protobuf.Struct":
      return { type: "object" };
    case "google.protobuf.Value":
      return {};
    default:
      return undefined;
  }
}

// google.protobuf.Any as the REST surface writes it (CONTRACT section 3): the type URL and the base64 of the
// binary message; decode it with the message type the URL names.
export const anySchema: Schema = {
  type: "object",
  description:
    "A message of another type, as the REST surface writes google.protobuf.Any: its type URL and the base64 of its binary protobuf encoding (decode with the .proto files, e.g. `protoc --decode=<type> <file>`).",
  properties: {
    typeUrl: { type: "string", description: "type.googleapis.com/<full message name>" },
    value: { type: "string", format: "byte", contentEncoding: "base64", description: "The message in binary protobuf, base64" },
  },
  required: ["typeUrl", "value"],
  additionalProperties: false,
};
