import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { DecryptResponseSchema, EncryptRequestSchema, EncryptResponseSchema } from "../../gen/kms/v1/kms_pb.js";
import { SEPARATE_PAYLOAD_BYTES, frameLayout, frameResponse } from "../../src/kms/crypto-response-frame.js";
import type { FrameParts } from "../../src/transport/grpc/grpc-unary-adapter.js";

// The bytes a caller receives: the frame, or its head and then its payload.
function whole(frame: Buffer | FrameParts): Buffer {
  return Array.isArray(frame) ? Buffer.concat([frame[0], frame[1]]) : (frame as Buffer);
}

describe("frameResponse", () => {
  const encryptLayout = frameLayout(EncryptResponseSchema, "keyId", "keyVersionId", "ciphertext");
  const decryptLayout = frameLayout(DecryptResponseSchema, "keyId", "keyVersionId", "plaintext");

  // Lengths around every varint boundary a 4 MiB message can reach, and ids of every width.
  const lengths = [0, 1, 127, 128, SEPARATE_PAYLOAD_BYTES - 1, SEPARATE_PAYLOAD_BYTES, 65536 + 33, 2097151, 2097152];
  const versions = [1, 127, 128, 16384, 2147483647];

  it.each(lengths)("matches toBinary of both responses for a %i-byte payload, in a gRPC envelope", (length) => {
    for (const keyVersionId of versions) {
      const payload = Buffer.alloc(length, 7);
      for (const keyId of ["", "k", "ключ-ü", "x".repeat(200)]) {
        const frame = whole(frameResponse(encryptLayout, keyId, keyVersionId, payload));
        expect(frame[0]).toBe(0);
        expect(frame.readUInt32BE(1)).toBe(frame.length - 5);
        expect(whole(frameResponse(decryptLayout, keyId, keyVersionId, payload)).equals(frame)).toBe(true);
        const encrypt = toBinary(EncryptResponseSchema, create(EncryptResponseSchema, { keyId, keyVersionId, ciphertext: payload }));
        const decrypt = toBinary(DecryptResponseSchema, create(DecryptResponseSchema, { keyId, keyVersionId, plaintext: payload }));
        expect(Buffer.from(frame.subarray(5)).equals(Buffer.from(encrypt))).toBe(true);
        expect(Buffer.from(frame.subarray(5)).equals(Buffer.from(decrypt))).toBe(true);
      }
    }
  });

  it("writes a payload of 16 KiB or more after the head as it is, and copies a smaller one into one buffer", () => {
    const large = Buffer.alloc(SEPARATE_PAYLOAD_BYTES, 1);
    const parts = frameResponse(encryptLayout, "key-1", 2, large);
    expect(Array.isArray(parts)).toBe(true);
    const [head, payload] = parts as FrameParts;
    // Not a copy: the caller's buffer itself.
    expect(payload).toBe(large);
    expect(head.readUInt32BE(1)).toBe(head.length - 5 + large.length);
    const small = Buffer.alloc(SEPARATE_PAYLOAD_BYTES - 1, 1);
    expect(Buffer.isBuffer(frameResponse(encryptLayout, "key-1", 2, small))).toBe(true);
  });

  it("refuses at start-up a message with a field its encoder would not write", () => {
    expect(() => frameLayout(EncryptRequestSchema, "keyId", "keyVersionId", "plaintext")).toThrow(/fields its gRPC frame encoder does not write/);
    expect(() => frameLayout(EncryptResponseSchema, "keyId", "ciphertext", "keyVersionId")).toThrow(/must be a singular INT32 field/);
  });
});
