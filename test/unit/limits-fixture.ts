import { create, createFileRegistry, setExtension } from "@bufbuild/protobuf";
import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf";
import {
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FieldDescriptorProtoSchema,
  FieldOptionsSchema,
  FileDescriptorProtoSchema,
  file_google_protobuf_field_mask,
} from "@bufbuild/protobuf/wkt";
import type { FieldDescriptorProto } from "@bufbuild/protobuf/wkt";
import { max_items } from "../../gen/cloudplane/api/v1/policy_pb.js";

// Request types of every shape the served protos do not have (yet): packed numbers, maps, lists of messages,
// nested bounds, so that the counters are tested on each. Built as descriptors at run time, with the same
// (cloudplane.api.v1.max_items) option the protos declare.

const T = FieldDescriptorProto_Type;
const REPEATED = FieldDescriptorProto_Label.REPEATED;

type FieldInit = Omit<MessageInitShape<typeof FieldDescriptorProtoSchema>, "$typeName">;

function field(name: string, number: number, type: FieldDescriptorProto_Type, more: FieldInit & { max?: number } = {}): FieldDescriptorProto {
  const { max, ...rest } = more;
  const options = create(FieldOptionsSchema);
  if (max !== undefined) setExtension(options, max_items, max);
  return create(FieldDescriptorProtoSchema, { name, number, type, jsonName: camel(name), options, ...rest });
}

function camel(name: string): string {
  return name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

// message Inner { repeated string tags = 1 [max 2]; int64 n = 2; }
// message Sample {
//   repeated int32 nums = 1 [max 5];            packable
//   map<string, Inner> inner_by_key = 2 [max 3];
//   repeated Inner inners = 3 [max 2];
//   Inner one = 4;
//   google.protobuf.FieldMask mask = 5 [max 2];
//   repeated fixed64 fixeds = 6 [max 3];
//   string name = 7;
//   map<string, string> tags = 8 [max 2];
// }
// message Node { Node next = 1; repeated string tags = 2 [max 2]; }   recursive
// message Unbounded { repeated string items = 1; }
// message BoundOnScalar { string name = 1 [max 3]; }
// message LongName { string nnn...n = 1; }   a field name of 257 characters
const file = create(FileDescriptorProtoSchema, {
  name: "limits_fixture.proto",
  package: "fixture",
  syntax: "proto3",
  dependency: ["google/protobuf/field_mask.proto"],
  messageType: [
    {
      name: "Inner",
      field: [field("tags", 1, T.STRING, { label: REPEATED, max: 2 }), field("n", 2, T.INT64)],
    },
    {
      name: "Sample",
      field: [
        field("nums", 1, T.INT32, { label: REPEATED, max: 5 }),
        field("inner_by_key", 2, T.MESSAGE, { label: REPEATED, typeName: ".fixture.Sample.InnerByKeyEntry", max: 3 }),
        field("inners", 3, T.MESSAGE, { label: REPEATED, typeName: ".fixture.Inner", max: 2 }),
        field("one", 4, T.MESSAGE, { typeName: ".fixture.Inner" }),
        field("mask", 5, T.MESSAGE, { typeName: ".google.protobuf.FieldMask", max: 2 }),
        field("fixeds", 6, T.FIXED64, { label: REPEATED, max: 3 }),
        field("name", 7, T.STRING),
        field("tags", 8, T.MESSAGE, { label: REPEATED, typeName: ".fixture.Sample.TagsEntry", max: 2 }),
      ],
      nestedType: [
        { name: "InnerByKeyEntry", field: [field("key", 1, T.STRING), field("value", 2, T.MESSAGE, { typeName: ".fixture.Inner" })], options: { mapEntry: true } },
        { name: "TagsEntry", field: [field("key", 1, T.STRING), field("value", 2, T.STRING)], options: { mapEntry: true } },
      ],
    },
    {
      name: "Node",
      field: [field("next", 1, T.MESSAGE, { typeName: ".fixture.Node" }), field("tags", 2, T.STRING, { label: REPEATED, max: 2 })],
    },
    { name: "Unbounded", field: [field("items", 1, T.STRING, { label: REPEATED })] },
    { name: "BoundOnScalar", field: [field("name", 1, T.STRING, { max: 3 })] },
    { name: "LongName", field: [field("n".repeat(257), 1, T.STRING)] },
  ],
});

const registry = createFileRegistry(file, (name) => (name === "google/protobuf/field_mask.proto" ? file_google_protobuf_field_mask : undefined));

function message(name: string): DescMessage {
  const desc = registry.getMessage(`fixture.${name}`);
  if (desc === undefined) throw new Error(`no fixture.${name}`);
  return desc;
}

export const SampleDesc = message("Sample");
export const InnerDesc = message("Inner");
export const NodeDesc = message("Node");
export const UnboundedDesc = message("Unbounded");
export const BoundOnScalarDesc = message("BoundOnScalar");
export const LongNameDesc = message("LongName");
