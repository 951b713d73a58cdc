import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { DecryptResponseSchema, EncryptRequestSchema, EncryptResponseSchema } from "../../gen/kms/v1/kms_pb.js";
import { frameLayout, frameResponse } from "../../src/kms/crypto-response-frame.js";

describe("frameResponse", () => {
  const encryptLayout = frameLayout(EncryptResponseSchema, "keyId", "keyVersionId", "ciphertext");
  const decryptLayout = frameLayout(DecryptResponseSchema, "keyId", "keyVersionId", "plaintext");

  // Lengths around every varint boundary a 4 MiB message can reach, and ids of every width.
  const lengths = [0, 1, 127, 128, 16383, 16384, 65536 + 33, 2097151, 2097152];
  const versions = [1, 127, 128, 16384, 2147483647];

  it.each(lengths)("matches toBinary of both responses for a %i-byte payload, in a gRPC envelope", (length) => {
    for (const keyVersionId of versions) {
      const payload = Buffer.alloc(length, 7);
      for (const keyId of ["", "k", "ключ-ü", "x".repeat(200)]) {
        const frame = frameResponse(encryptLayout, keyId, keyVersionId, payload);
        expect(frame[0]).toBe(0);
        expect(frame.readUInt32BE(1)).toBe(frame.length - 5);
        expect(frameResponse(decryptLayout, keyId, keyVersionId, payload).equals(frame)).toBe(true);
        const encrypt = toBinary(EncryptResponseSchema, create(EncryptResponseSchema, { keyId, keyVersionId, ciphertext: payload }));
        const decrypt = toBinary(DecryptResponseSchema, create(DecryptResponseSchema, { keyId, keyVersionId, plaintext: payload }));
        expect(Buffer.from(frame.subarray(5)).equals(Buffer.from(encrypt))).toBe(true);
        expect(Buffer.from(frame.subarray(5)).equals(Buffer.from(decrypt))).toBe(true);
      }
    }
  });

  it("refuses at start-up a message with a field its encoder would not write", () => {
    expect(() => frameLayout(EncryptRequestSchema, "keyId", "keyVersionId", "plaintext")).toThrow(/fields its gRPC frame encoder does not write/);
    expect(() => frameLayout(EncryptResponseSchema, "keyId", "ciphertext", "keyVersionId")).toThrow(/must be a singular INT32 field/);
  });
});
