import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { create, createFileRegistry, toJson } from "@bufbuild/protobuf";
import { protoCamelCase } from "@bufbuild/protobuf/reflect";
import { base64Decode, base64Encode } from "@bufbuild/protobuf/wire";
import {
  BytesValueSchema,
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FileDescriptorProtoSchema,
  file_google_protobuf_wrappers,
} from "@bufbuild/protobuf/wkt";
import { toRestJson } from "../../src/transport/rest/json-any.js";
import { decodeStrictBase64 } from "../../src/transport/json-base64.js";
import { encodeBase64 } from "../../src/transport/rest/json-bytes.js";

// The native base64 of JSON bytes must be protobuf-es's to the byte for every string it takes (one alphabet, padded
// or not), and refuse (undefined) every other string, which protobuf-es would read leniently or refuse.

function protobufEs(text: string): Uint8Array | "refused" {
  try {
    return base64Decode(text);
  } catch {
    return "refused";
  }
}

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_";
// The alphabet, with now and then (or often) padding, whitespace or a character neither accepts.
const base64ish = fc.integer({ min: 1, max: 40 }).chain((odds) =>
  fc
    .array(
      fc.oneof(
        { weight: odds, arbitrary: fc.constantFrom(...alphabet) },
        // Characters above U+00FF whose low byte is in the alphabet (U+0141 "Ł" is 0x41 "A"), which Node's decoder read so.
        { weight: 1, arbitrary: fc.constantFrom("=", "=", " ", "\n", "\t", "*", "é", ".", "€", "\u0000", "Ł", "ř", "\u0130", "\u2b2f") },
      ),
      { maxLength: 40 },
    )
    .map((chars) => chars.join("")),
);

describe("JSON bytes in strict native base64", () => {
  it("decodes exactly what protobuf-es decodes, and only strings of one alphabet", () => {
    fc.assert(
      fc.property(base64ish, (text) => {
        const fast = decodeStrictBase64(text);
        if (fast === undefined) return;
        expect(/[-_]/.test(text) && /[+/]/.test(text)).toBe(false);
        expect(fast).toBeInstanceOf(Uint8Array);
        expect(Buffer.isBuffer(fast)).toBe(false);
        expect(protobufEs(text)).toEqual(fast);
      }),
      { numRuns: 50_000 },
    );
  });

  it("decodes the encodings of random bytes, in both alphabets, padded or not", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        const std = Buffer.from(bytes).toString("base64");
        const forms = [std, std.replace(/=+$/, ""), Buffer.from(bytes).toString("base64url")];
        for (const text of forms) {
          expect(decodeStrictBase64(text)).toEqual(bytes);
          expect(protobufEs(text)).toEqual(bytes);
        }
      }),
    );
  });

  it("refuses what protobuf-es refuses or reads leniently", () => {
    // The last seven protobuf-es read as bytes: "=aGk" and "aG k=" as "hi", "aGk=aGk=" as "hihi", "a===" and " " as
    // none, "+/-_" (both alphabets) as 0xfbffbf.
    for (const text of ["A", "AAAAA", "A===", "AB=C", "AB==CD==", "AB CD", "AB\nCD", "AB*D", "=", "AB=", "ŁŁŁŁ", "řWFk", "AAA\u0130", "=aGk", "aG k=", "aGk=aGk=", "aGk=====", "a===", " ", "+/-_"]) {
      expect(decodeStrictBase64(text)).toBeUndefined();
    }
  });

  it("encodes as protobuf-es does: standard alphabet, padded", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(8), (bytes, offset) => {
        const view = new Uint8Array(offset + bytes.length);
        view.set(bytes, offset);
        expect(encodeBase64(view.subarray(offset))).toBe(base64Encode(bytes));
      }),
    );
  });
});

// toRestJson writes bytes fields itself; for messages without an Any it must write exactly toJson's text, key
// order included, whatever the fields' presence.
describe("REST JSON of messages with bytes fields", () => {
  const T = FieldDescriptorProto_Type;
  const L = FieldDescriptorProto_Label;
  const field = (name: string, number: number, type: FieldDescriptorProto_Type, extra: object = {}) => ({ name, number, type, label: L.OPTIONAL, jsonName: protoCamelCase(name), ...extra });
  const registry = createFileRegistry(
    create(FileDescriptorProtoSchema, {
      name: "bytes_test.proto",
      package: "bytestest",
      syntax: "proto3",
      messageType: [
        {
          name: "Three",
          field: [
            field("id", 1, T.STRING),
            field("plain_bytes", 2, T.BYTES),
            field("optional_bytes", 3, T.BYTES, { proto3Optional: true, oneofIndex: 0 }),
            field("many", 4, T.BYTES, { label: L.REPEATED }),
            field("count", 5, T.INT32),
            field("wrapped", 6, T.MESSAGE, { typeName: ".google.protobuf.BytesValue" }),
          ],
          oneofDecl: [{ name: "_optional_bytes" }],
        },
      ],
      dependency: ["google/protobuf/wrappers.proto"],
    }),
    (name: string) => (name === "google/protobuf/wrappers.proto" ? file_google_protobuf_wrappers : undefined),
  );
  const proto2 = createFileRegistry(
    create(FileDescriptorProtoSchema, {
      name: "bytes_test2.proto",
      package: "bytestest",
      syntax: "proto2",
      messageType: [{ name: "Two", field: [field("with_default", 1, T.BYTES, { defaultValue: "x" }), field("other", 2, T.BYTES)] }],
    }),
    () => undefined,
  );
  const three = registry.getMessage("bytestest.Three")!;
  const two = proto2.getMessage("bytestest.Two")!;
  const someBytes = fc.option(fc.uint8Array({ maxLength: 20 }), { nil: undefined });

  it("proto3, implicit and explicit presence, lists and wrappers", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 5 }), someBytes, someBytes, fc.array(fc.uint8Array({ maxLength: 5 }), { maxLength: 3 }), fc.integer(), someBytes, (id, plain, optional, many, count, wrapped) => {
        const message = create(three, { id, plainBytes: plain, optionalBytes: optional, many, count, wrapped });
        expect(JSON.stringify(toRestJson(three, message))).toBe(JSON.stringify(toJson(three, message)));
      }),
    );
  });

  it("proto2, defaults on the prototype", () => {
    fc.assert(
      fc.property(someBytes, someBytes, (withDefault, other) => {
        const message = create(two, { withDefault, other });
        expect(JSON.stringify(toRestJson(two, message))).toBe(JSON.stringify(toJson(two, message)));
      }),
    );
  });

  it("a bare google.protobuf.BytesValue", () => {
    const message = create(BytesValueSchema, { value: new Uint8Array([1, 2, 3]) });
    expect(toRestJson(BytesValueSchema, message)).toBe("AQID");
  });
});
