import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fromJsonString } from "@bufbuild/protobuf";
import { StructSchema } from "@bufbuild/protobuf/wkt";
import { duplicateMemberOf } from "../../src/transport/rest/json-duplicates.js";

// REST refuses a JSON object that names a member twice, as protobuf-es's fromJsonString (Connect's JSON) does: the
// same texts, whatever the nesting, escapes and strings that look like JSON.

function protobufEsRefuses(text: string): boolean {
  try {
    fromJsonString(StructSchema, text);
    return false;
  } catch (err) {
    return /duplicate object key/.test((err as Error).message);
  }
}

// Member names from a small set, written plainly or with escapes, so that duplicates are frequent.
const name = fc.constantFrom('"a"', '"b"', '"\\u0061"', '"a\\"b"', '"\\\\"', '"{"', '"[,:]"');
const scalar = fc.oneof(fc.constantFrom("1", "-0.5e3", "true", "false", "null"), fc.string({ maxLength: 6 }).map((s) => JSON.stringify(s)), name);
const value: fc.Arbitrary<string> = fc.letrec<{ value: string; object: string; array: string }>((tie) => ({
  value: fc.oneof({ depthSize: "small", withCrossShrink: true }, scalar, tie("object"), tie("array")),
  object: fc.array(fc.tuple(name, tie("value"), fc.constantFrom("", " ", "\n")), { maxLength: 4 }).map((members) => `{${members.map(([n, v, ws]) => `${ws}${n}${ws}:${ws}${v}`).join(",")}}`),
  array: fc.array(tie("value"), { maxLength: 3 }).map((items) => `[${items.join(",")}]`),
})).value;
const objectText = fc.array(fc.tuple(name, value), { maxLength: 5 }).map((members) => `{${members.map(([n, v]) => `${n}:${v}`).join(",")}}`);

describe("duplicate members in a REST JSON body", () => {
  it("are found exactly where protobuf-es finds them", () => {
    fc.assert(
      fc.property(objectText, (text) => {
        JSON.parse(text);
        expect(duplicateMemberOf(text) !== undefined, text).toBe(protobufEsRefuses(text));
      }),
      { numRuns: 5_000 },
    );
  });

  it("name the member, with its escapes decoded", () => {
    expect(duplicateMemberOf('{"keyId":"a","keyId":"b"}')).toBe("keyId");
    expect(duplicateMemberOf('{"keyId":"a","key\\u0049d":"b"}')).toBe("keyId");
    expect(duplicateMemberOf('{"key":{"name":"a","name":"b"}}')).toBe("name");
    expect(duplicateMemberOf('{"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":2}]}')).toBeUndefined();
    expect(duplicateMemberOf('{"keyId":"a\\"},{\\"keyId","keyVersionId":1}')).toBeUndefined();
    expect(duplicateMemberOf('{"keyId":"a\\\\","keyId":1}')).toBe("keyId");
  });
});
