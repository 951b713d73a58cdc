import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { create, createFileRegistry, fromJson, toJson } from "@bufbuild/protobuf";
import type { DescMessage, JsonObject, JsonValue } from "@bufbuild/protobuf";
import { nestedTypes, protoCamelCase } from "@bufbuild/protobuf/reflect";
import { FieldDescriptorProto_Label, FieldDescriptorProto_Type, FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { file_compute_auth_v2_auth } from "../../gen/compute/auth/v2/auth_pb.js";
import { file_compute_cluster_v1_node_pool } from "../../gen/compute/cluster/v1/node_pool_pb.js";
import { file_compute_cluster_v1_task } from "../../gen/compute/cluster/v1/task_pb.js";
import { file_compute_configs_v2_configs } from "../../gen/compute/configs/v2/configs_pb.js";
import { file_compute_vapp_v1_vapp } from "../../gen/compute/vapp/v1/vapp_pb.js";
import { DecryptRequestSchema, DecryptResponseSchema, EncryptRequestSchema, EncryptResponseSchema, file_kms_v1_kms } from "../../gen/kms/v1/kms_pb.js";
import { flatJsonOf } from "../../src/transport/rest/flat-json.js";

// The REST surface reads and writes flat messages itself (src/transport/rest/flat-json.ts). It must be protobuf-es
// to the letter: whatever JSON it reads, fromJson reads to the same message; whatever it leaves, fromJson decides;
// whatever it writes is toJson's text, key order included.

const T = FieldDescriptorProto_Type;
const L = FieldDescriptorProto_Label;
const field = (name: string, number: number, type: FieldDescriptorProto_Type, extra: object = {}) => ({ name, number, type, label: L.OPTIONAL, jsonName: protoCamelCase(name), ...extra });

// Every kind of field the codec takes, and messages it must decline.
const registry = createFileRegistry(
  create(FileDescriptorProtoSchema, {
    name: "flat_test.proto",
    package: "flattest",
    syntax: "proto3",
    messageType: [
      {
        name: "Every",
        field: [
          field("a_string", 1, T.STRING),
          field("a_bool", 2, T.BOOL),
          field("an_int32", 3, T.INT32),
          field("a_sint32", 4, T.SINT32),
          field("a_sfixed32", 5, T.SFIXED32),
          field("a_uint32", 6, T.UINT32),
          field("a_fixed32", 7, T.FIXED32),
          field("some_bytes", 8, T.BYTES),
          field("more_bytes", 9, T.BYTES),
        ],
      },
      { name: "WithOptional", field: [field("maybe", 1, T.STRING, { proto3Optional: true, oneofIndex: 0 })], oneofDecl: [{ name: "_maybe" }] },
      { name: "WithInt64", field: [field("big", 1, T.INT64)] },
      { name: "WithList", field: [field("many", 1, T.STRING, { label: L.REPEATED })] },
      { name: "WithDouble", field: [field("ratio", 1, T.DOUBLE)] },
    ],
  }),
  () => undefined,
);
const every = registry.getMessage("flattest.Every")!;

function allMessages(): DescMessage[] {
  const files = [file_kms_v1_kms, file_compute_auth_v2_auth, file_compute_cluster_v1_node_pool, file_compute_cluster_v1_task, file_compute_configs_v2_configs, file_compute_vapp_v1_vapp];
  return files.flatMap((file) => [...nestedTypes(file)].filter((t): t is DescMessage => t.kind === "message"));
}
const flatMessages = [every, ...allMessages().filter((desc) => flatJsonOf(desc) !== null)];

function protobufEs(desc: DescMessage, json: JsonObject): ReturnType<typeof fromJson> | "refused" {
  try {
    return fromJson(desc, json, { ignoreUnknownFields: false });
  } catch {
    return "refused";
  }
}

// Values of every JSON type, the plain forms and the ones left to protobuf-es: numbers as strings, fractions,
// values out of range, URL-safe and broken base64, lone surrogates.
const anyValue: fc.Arbitrary<JsonValue> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.constantFrom(0, -0, 1.5, 2 ** 31, 2 ** 31 - 1, -(2 ** 31), -(2 ** 31) - 1, 2 ** 32, 2 ** 32 - 1, -1, 1e300, 3.0),
  fc.string({ maxLength: 8 }),
  fc.constantFrom("1", " 1", "1e0", "", "AQID", "AQI", "AQI=", "-_8=", "A", "a b", "\ud800", "x\udfffy", "é"),
  fc.uint8Array({ maxLength: 12 }).map((b) => Buffer.from(b).toString("base64")),
  fc.constant<JsonValue>([]),
  fc.constant<JsonValue>({}),
);

// A JSON object of the message's fields, each under one of its two names, now and then under both.
function jsonFor(desc: DescMessage): fc.Arbitrary<JsonObject> {
  const names = desc.fields.flatMap((f) => [f.jsonName, f.name]);
  if (names.length === 0) return fc.constant({});
  return fc.dictionary(fc.constantFrom(...names), anyValue, { maxKeys: names.length });
}

// The plain forms alone, which the codec must read itself.
function plainJsonFor(desc: DescMessage): fc.Arbitrary<JsonObject> {
  const members = desc.fields.map((f) => {
    const value: fc.Arbitrary<JsonValue> = (() => {
      switch (f.scalar) {
        case 8: // BOOL
          return fc.boolean();
        case 9: // STRING
          return fc.string({ maxLength: 8 });
        case 12: // BYTES
          return fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b).toString("base64"));
        case 13: // UINT32
        case 7: // FIXED32
          return fc.integer({ min: 0, max: 2 ** 32 - 1 });
        default:
          return fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
      }
    })();
    return [f.jsonName, fc.option(value, { nil: undefined })] as const;
  });
  return fc.record(Object.fromEntries(members)).map((o) => JSON.parse(JSON.stringify(o)) as JsonObject);
}

describe("REST proto-JSON of flat messages", () => {
  it("takes the messages of Encrypt and Decrypt, and declines optional, 64-bit, repeated and floating fields", () => {
    for (const desc of [EncryptRequestSchema, EncryptResponseSchema, DecryptRequestSchema, DecryptResponseSchema, every]) expect(flatJsonOf(desc), desc.typeName).not.toBeNull();
    for (const name of ["WithOptional", "WithInt64", "WithList", "WithDouble"]) expect(flatJsonOf(registry.getMessage(`flattest.${name}`)!), name).toBeNull();
  });

  for (const desc of flatMessages) {
    it(`${desc.typeName}: reads only what fromJson reads to the same message, and leaves the rest to it`, () => {
      const codec = flatJsonOf(desc)!;
      fc.assert(
        fc.property(jsonFor(desc), (json) => {
          const before = JSON.stringify(json);
          const read = codec.read(json);
          expect(JSON.stringify(json), "the JSON is left as it was").toBe(before);
          if (read === undefined) return;
          const expected = protobufEs(desc, json);
          expect(expected).not.toBe("refused");
          expect(read).toEqual(expected);
        }),
        { numRuns: 2_000 },
      );
    });

    it(`${desc.typeName}: reads every plain form itself`, () => {
      const codec = flatJsonOf(desc)!;
      fc.assert(
        fc.property(plainJsonFor(desc), (json) => {
          const read = codec.read(json);
          expect(read).toBeDefined();
          expect(read).toEqual(fromJson(desc, json));
        }),
        { numRuns: 500 },
      );
    });

    it(`${desc.typeName}: writes toJson's text, from the message or from its init object`, () => {
      const codec = flatJsonOf(desc)!;
      fc.assert(
        fc.property(plainJsonFor(desc), (json) => {
          const message = fromJson(desc, json);
          const text = JSON.stringify(toJson(desc, message));
          expect(JSON.stringify(codec.write(message))).toBe(text);
          // The init object a handler returns: only the fields it sets.
          const init = Object.fromEntries(desc.fields.filter((f) => json[f.jsonName] !== undefined).map((f) => [f.localName, (message as unknown as Record<string, unknown>)[f.localName]]));
          expect(JSON.stringify(codec.write(init))).toBe(text);
        }),
        { numRuns: 500 },
      );
    });
  }
});
