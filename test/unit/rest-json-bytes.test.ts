import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { base64Decode, base64Encode } from "@bufbuild/protobuf/wire";
import { decodePlainBase64, encodeBase64 } from "../../src/transport/rest/json-bytes.js";

// The native base64 of the REST surface must be protobuf-es's to the byte: the same bytes for every string it
// decodes itself, and no decision at all (undefined) on any string protobuf-es might read otherwise or refuse.

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
        { weight: 1, arbitrary: fc.constantFrom("=", "=", " ", "\n", "\t", "*", "é", ".", "€", "\u0000") },
      ),
      { maxLength: 40 },
    )
    .map((chars) => chars.join("")),
);

describe("REST bytes in native base64", () => {
  it("decodes exactly what protobuf-es decodes, and leaves every other string to it", () => {
    fc.assert(
      fc.property(base64ish, (text) => {
        const fast = decodePlainBase64(text);
        if (fast === undefined) return;
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
          expect(decodePlainBase64(text)).toEqual(bytes);
          expect(protobufEs(text)).toEqual(bytes);
        }
      }),
    );
  });

  it("leaves to protobuf-es what it refuses or reads its own way", () => {
    for (const text of ["A", "AAAAA", "A===", "AB=C", "AB==CD==", "AB CD", "AB\nCD", "AB*D", "=", "AB="]) {
      expect(decodePlainBase64(text)).toBeUndefined();
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
