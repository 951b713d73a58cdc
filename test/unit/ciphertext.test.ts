import { createSecretKey, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ciphertextVersion, open, seal } from "../../src/kms/ciphertext.js";
import { keyLengthBytes } from "../../src/kms/model.js";
import type { Algorithm } from "../../src/kms/model.js";

const keyId = Buffer.from("key-one");
const text = Buffer.from("attack at dawn");
const aad = Buffer.from("context");

describe.each(["AES_128", "AES_192", "AES_256"] as Algorithm[])("ciphertext with %s", (algorithm) => {
  const key = createSecretKey(randomBytes(keyLengthBytes[algorithm]));

  it("round-trips and names its version", () => {
    const sealed = seal(algorithm, key, keyId, 7, text, aad);
    expect(sealed.length).toBe(5 + 12 + text.length + 16);
    expect(sealed[0]).toBe(1);
    expect(ciphertextVersion(sealed)).toBe(7);
    expect(Buffer.from(open(algorithm, key, keyId, sealed, aad)!).toString()).toBe("attack at dawn");
  });

  it("uses a fresh nonce each time", () => {
    expect(Buffer.from(seal(algorithm, key, keyId, 1, text, aad)).equals(Buffer.from(seal(algorithm, key, keyId, 1, text, aad)))).toBe(false);
  });

  it("fails on other AAD, another key id, a flipped bit, a changed version or truncation", () => {
    const sealed = Buffer.from(seal(algorithm, key, keyId, 1, text, aad));
    expect(open(algorithm, key, keyId, sealed, Buffer.from("other"))).toBeNull();
    expect(open(algorithm, key, Buffer.from("key-two"), sealed, aad)).toBeNull();
    for (const index of [0 + 5, 17, sealed.length - 1]) {
      const flipped = Buffer.from(sealed);
      flipped[index]! ^= 1;
      expect(open(algorithm, key, keyId, flipped, aad)).toBeNull();
    }
    const otherVersion = Buffer.from(sealed);
    otherVersion.writeUInt32BE(2, 1);
    expect(open(algorithm, key, keyId, otherVersion, aad)).toBeNull();
    expect(open(algorithm, key, keyId, sealed.subarray(0, sealed.length - 1), aad)).toBeNull();
  });
});

describe("ciphertextVersion", () => {
  it("rejects what cannot be a ciphertext", () => {
    expect(ciphertextVersion(new Uint8Array(10))).toBeNull();
    const wrongFormat = Buffer.alloc(40);
    wrongFormat[0] = 9;
    expect(ciphertextVersion(wrongFormat)).toBeNull();
    const versionZero = Buffer.alloc(40);
    versionZero[0] = 1;
    expect(ciphertextVersion(versionZero)).toBeNull();
  });
});
