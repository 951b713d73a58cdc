import { create, createFileRegistry, setExtension } from "@bufbuild/protobuf";
import type { DescMessage, DescMethodUnary, DescService, MessageInitShape } from "@bufbuild/protobuf";
import { protoCamelCase } from "@bufbuild/protobuf/reflect";
import {
  DescriptorProtoSchema,
  FieldDescriptorProtoSchema,
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FieldOptionsSchema,
  FileDescriptorProtoSchema,
  MethodOptionsSchema,
  ServiceOptionsSchema,
  file_google_protobuf_any,
  file_google_protobuf_duration,
  file_google_protobuf_field_mask,
  file_google_protobuf_timestamp,
  file_google_protobuf_wrappers,
} from "@bufbuild/protobuf/wkt";
import { MethodPolicySchema, ServicePolicySchema, max_items, method_policy, service_policy } from "../../gen/cloudplane/api/v1/policy_pb.js";
import { http } from "../../gen/google/api/annotations_pb.js";
import { HttpRuleSchema } from "../../gen/google/api/http_pb.js";

// A test-only service, built at run time, whose google.api.http annotations exercise what kms.proto does not:
// verbs, "**", {name=shelves/*/items/*}, literal-vs-variable precedence, additional_bindings, a custom method,
// repeated/enum/bool/well-known-type query parameters, a body bound to one field, and Any in responses.

const T = FieldDescriptorProto_Type;

function field(
  name: string,
  number: number,
  type: FieldDescriptorProto_Type,
  opts: { typeName?: string; repeated?: boolean; oneofIndex?: number } = {},
): MessageInitShape<typeof FieldDescriptorProtoSchema> {
  // Every repeated field and FieldMask of a request declares its bound (src/pipeline/message-limits.ts); these are
  // far above what the tests send.
  const bounded = opts.repeated === true || opts.typeName === ".google.protobuf.FieldMask";
  const options = create(FieldOptionsSchema);
  if (bounded) setExtension(options, max_items, 1000);
  return {
    options,
    name,
    number,
    type,
    jsonName: protoCamelCase(name),
    label: opts.repeated === true ? FieldDescriptorProto_Label.REPEATED : FieldDescriptorProto_Label.OPTIONAL,
    ...(opts.typeName === undefined ? {} : { typeName: opts.typeName }),
    ...(opts.oneofIndex === undefined ? {} : { oneofIndex: opts.oneofIndex }),
  };
}

const msg = (typeName: string) => ({ typeName });
const KIND = ".resttest.v1.Item.Kind";

type MessageInit = MessageInitShape<typeof DescriptorProtoSchema>;

function mapEntry(name: string, valueType: FieldDescriptorProto_Type, valueTypeName?: string): MessageInit {
  const value = field("value", 2, valueType, valueTypeName === undefined ? {} : msg(valueTypeName));
  return { name, field: [field("key", 1, T.STRING), value], options: { mapEntry: true } };
}

// Every method of a served service declares its policy (src/pipeline/method-policy.ts).
function rule(init: MessageInitShape<typeof HttpRuleSchema>) {
  const options = create(MethodOptionsSchema);
  setExtension(options, http, create(HttpRuleSchema, init));
  setExtension(options, method_policy, create(MethodPolicySchema, { permission: "resttest.items.use", public: true }));
  return options;
}

function servicePolicy() {
  const options = create(ServiceOptionsSchema);
  setExtension(options, service_policy, create(ServicePolicySchema, { errorDomain: "cloudplane" }));
  return options;
}

function method(name: string, input: string, output: string, init: MessageInitShape<typeof HttpRuleSchema>) {
  return { name, inputType: `.resttest.v1.${input}`, outputType: `.resttest.v1.${output}`, options: rule(init) };
}

const filterFields = [
  field("tags", 1, T.STRING, { repeated: true }),
  field("kind", 2, T.ENUM, msg(KIND)),
  field("active", 3, T.BOOL),
  field("ttl", 4, T.MESSAGE, msg(".google.protobuf.Duration")),
  field("after", 5, T.MESSAGE, msg(".google.protobuf.Timestamp")),
  field("mask", 6, T.MESSAGE, msg(".google.protobuf.FieldMask")),
  field("min_size", 7, T.INT64),
  field("limit", 8, T.MESSAGE, msg(".google.protobuf.Int32Value")),
  field("kinds", 9, T.ENUM, { ...msg(KIND), repeated: true }),
  field("attrs", 10, T.MESSAGE, { ...msg(".resttest.v1.Filter.AttrsEntry"), repeated: true }),
  field("blob", 11, T.BYTES),
];

const messages: MessageInit[] = [
  {
    name: "Item",
    field: [
      field("id", 1, T.STRING),
      field("name", 2, T.STRING),
      field("tags", 3, T.STRING, { repeated: true }),
      field("kind", 4, T.ENUM, msg(KIND)),
      field("size", 5, T.INT64),
      field("by_email", 6, T.STRING, { oneofIndex: 0 }),
      field("by_phone", 7, T.STRING, { oneofIndex: 0 }),
    ],
    oneofDecl: [{ name: "contact" }],
    enumType: [
      {
        name: "Kind",
        value: [
          { name: "KIND_UNSPECIFIED", number: 0 },
          { name: "SMALL", number: 1 },
          { name: "LARGE", number: 2 },
        ],
      },
    ],
  },
  { name: "Filter", field: filterFields, nestedType: [mapEntry("AttrsEntry", T.STRING)] },
  {
    name: "ListItemsRequest",
    field: [
      field("shelf", 1, T.STRING),
      field("filter", 2, T.MESSAGE, msg(".resttest.v1.Filter")),
      field("page_size", 3, T.INT32),
      field("items", 4, T.MESSAGE, { ...msg(".resttest.v1.Item"), repeated: true }),
    ],
  },
  {
    name: "GetItemRequest",
    field: [
      field("shelf", 1, T.STRING),
      field("item_id", 2, T.INT32),
      field("name", 3, T.STRING),
      field("kind", 4, T.ENUM, msg(KIND)),
    ],
  },
  {
    name: "WaitItemRequest",
    field: [
      field("shelf", 1, T.STRING),
      field("item_id", 2, T.INT32),
      field("timeout", 3, T.MESSAGE, msg(".google.protobuf.Duration")),
    ],
  },
  {
    name: "UpdateItemRequest",
    field: [
      field("shelf", 1, T.STRING),
      field("item", 2, T.MESSAGE, msg(".resttest.v1.Item")),
      field("update_mask", 3, T.MESSAGE, msg(".google.protobuf.FieldMask")),
    ],
  },
  {
    name: "Envelope",
    field: [
      field("note", 1, T.STRING),
      field("payload", 2, T.MESSAGE, msg(".google.protobuf.Any")),
      field("extras", 3, T.MESSAGE, { ...msg(".google.protobuf.Any"), repeated: true }),
      field("named", 4, T.MESSAGE, { ...msg(".resttest.v1.Envelope.NamedEntry"), repeated: true }),
      field("next", 5, T.MESSAGE, msg(".resttest.v1.Envelope")),
      field("items", 6, T.MESSAGE, { ...msg(".resttest.v1.Item"), repeated: true }),
      field("ttl", 7, T.MESSAGE, msg(".google.protobuf.Duration")),
    ],
    nestedType: [mapEntry("NamedEntry", T.MESSAGE, ".google.protobuf.Any")],
  },
];

const get = (value: string) => ({ pattern: { case: "get" as const, value } });

const methods = [
  method("ListItems", "ListItemsRequest", "ListItemsRequest", get("/v1/shelves/{shelf}/items")),
  method("ListSpecialItems", "ListItemsRequest", "ListItemsRequest", get("/v1/shelves/special/items")),
  method("GetItem", "GetItemRequest", "GetItemRequest", {
    ...get("/v1/shelves/{shelf}/items/{item_id}"),
    additionalBindings: [get("/v1/items/{item_id}")],
  }),
  method("GetItemByName", "GetItemRequest", "GetItemRequest", get("/v2/{name=shelves/*/items/*}")),
  method("GetFile", "GetItemRequest", "GetItemRequest", get("/v2/files/{name=**}")),
  method("GetByKind", "GetItemRequest", "GetItemRequest", get("/v2/kinds/{kind}")),
  method("WaitItem", "WaitItemRequest", "WaitItemRequest", {
    pattern: { case: "post", value: "/v1/shelves/{shelf}/items/{item_id}:wait" },
    body: "*",
  }),
  method("UpdateItem", "UpdateItemRequest", "UpdateItemRequest", {
    pattern: { case: "patch", value: "/v1/shelves/{shelf}/items/{item.id}" },
    body: "item",
  }),
  method("PurgeShelf", "WaitItemRequest", "WaitItemRequest", {
    pattern: { case: "custom", value: { kind: "purge", path: "/v1/shelves/{shelf}:purge" } },
  }),
  method("GetEnvelope", "Envelope", "Envelope", get("/v1/envelopes/{note}")),
];

const wkt = [
  file_google_protobuf_any,
  file_google_protobuf_duration,
  file_google_protobuf_field_mask,
  file_google_protobuf_timestamp,
  file_google_protobuf_wrappers,
];

const registry = createFileRegistry(
  create(FileDescriptorProtoSchema, {
    name: "resttest/v1/fixture.proto",
    package: "resttest.v1",
    syntax: "proto3",
    dependency: [...wkt.map((f) => f.proto.name)],
    messageType: messages,
    service: [{ name: "ItemService", method: methods, options: servicePolicy() }],
  }),
  (name) => wkt.find((f) => f.proto.name === name),
);

function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`fixture: ${what} missing`);
  return value;
}

export const ItemService: DescService = need(registry.getService("resttest.v1.ItemService"), "ItemService");
export const schema = (name: string): DescMessage => need(registry.getMessage(`resttest.v1.${name}`), name);

// A method of ItemService, for registering a fake implementation with router.rpc.
export function itemMethod(name: string): DescMethodUnary {
  const found = need(ItemService.methods.find((m) => m.name === name), name);
  if (found.methodKind !== "unary") throw new Error(`fixture: ${name} is not unary`);
  return found as DescMethodUnary;
}
