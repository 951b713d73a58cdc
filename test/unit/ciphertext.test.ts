import { createCipheriv, createDecipheriv, createSecretKey, randomBytes } from "node:crypto";
import type { KeyObject } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ciphertextVersion, open, seal, sealInto, sealedLength, versionKey } from "../../src/kms/ciphertext.js";
import { keyLengthBytes } from "../../src/kms/model.js";
import type { Algorithm } from "../../src/kms/model.js";

const keyId = Buffer.from("key-one");
const text = Buffer.from("attack at dawn");
const aad = Buffer.from("context");
const gcm = { AES_128: "aes-128-gcm", AES_192: "aes-192-gcm", AES_256: "aes-256-gcm" } as const;

// The ciphertext format written out from its definition, independent of the code under test: format byte 1,
// version uint32 BE, 12-byte nonce, AES-GCM output, 16-byte tag; the GCM additional data is the 5-byte header,
// the key id's length as uint16 BE, the key id, then the caller's AAD. Every ciphertext ever stored must keep
// opening, so the code is checked against this in both directions.
function referenceAad(header: Buffer, id: Buffer, callerAad: Buffer): Buffer {
  const length = Buffer.alloc(2);
  length.writeUInt16BE(id.length);
  return Buffer.concat([header, length, id, callerAad]);
}

function referenceSeal(algorithm: Algorithm, secret: KeyObject, id: Buffer, version: number, plaintext: Buffer, callerAad: Buffer): Buffer {
  const header = Buffer.alloc(5);
  header[0] = 1;
  header.writeUInt32BE(version, 1);
  const nonce = randomBytes(12);
  const cipher = createCipheriv(gcm[algorithm], secret, nonce);
  cipher.setAAD(referenceAad(header, id, callerAad));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([header, nonce, body, cipher.getAuthTag()]);
}

function referenceOpen(algorithm: Algorithm, secret: KeyObject, id: Buffer, sealed: Buffer, callerAad: Buffer): Buffer {
  const decipher = createDecipheriv(gcm[algorithm], secret, sealed.subarray(5, 17));
  decipher.setAAD(referenceAad(sealed.subarray(0, 5), id, callerAad));
  decipher.setAuthTag(sealed.subarray(sealed.length - 16));
  return Buffer.concat([decipher.update(sealed.subarray(17, sealed.length - 16)), decipher.final()]);
}

describe.each(["AES_128", "AES_192", "AES_256"] as Algorithm[])("ciphertext with %s", (algorithm) => {
  const secret = createSecretKey(randomBytes(keyLengthBytes[algorithm]));
  const v7 = versionKey(algorithm, secret.export(), keyId.toString(), 7);
  const v1 = versionKey(algorithm, secret.export(), keyId.toString(), 1);

  it("round-trips and names its version", () => {
    const sealed = seal(v7, text, aad);
    expect(sealed.length).toBe(5 + 12 + text.length + 16);
    expect(sealedLength(text.length)).toBe(sealed.length);
    expect(sealed[0]).toBe(1);
    expect(ciphertextVersion(sealed)).toBe(7);
    expect(Buffer.from(open(v7, sealed, aad)!).toString()).toBe("attack at dawn");
  });

  it.each([
    ["with AAD", aad],
    ["without AAD", Buffer.alloc(0)],
  ])("matches the format's definition in both directions, %s", (_, callerAad) => {
    const ours = Buffer.from(seal(v7, text, callerAad));
    expect(referenceOpen(algorithm, secret, keyId, ours, callerAad).toString()).toBe("attack at dawn");
    const theirs = referenceSeal(algorithm, secret, keyId, 7, text, callerAad);
    expect(Buffer.from(open(v7, theirs, callerAad)!).toString()).toBe("attack at dawn");
  });

  it("seals into a larger buffer at an offset, touching nothing around it", () => {
    const out = Buffer.alloc(3 + sealedLength(text.length) + 3, 0xee);
    sealInto(out, 3, v7, text, aad);
    expect([...out.subarray(0, 3), ...out.subarray(out.length - 3)]).toEqual([0xee, 0xee, 0xee, 0xee, 0xee, 0xee]);
    expect(Buffer.from(open(v7, out.subarray(3, out.length - 3), aad)!).toString()).toBe("attack at dawn");
  });

  it("uses a fresh nonce each time", () => {
    expect(Buffer.from(seal(v1, text, aad)).equals(Buffer.from(seal(v1, text, aad)))).toBe(false);
  });

  it("fails on other AAD, another key id, a flipped bit, a changed version or truncation", () => {
    const sealed = Buffer.from(seal(v1, text, aad));
    expect(open(v1, sealed, Buffer.from("other"))).toBeNull();
    expect(open(v1, sealed, Buffer.alloc(0))).toBeNull();
    expect(open(versionKey(algorithm, secret.export(), "key-two", 1), sealed, aad)).toBeNull();
    for (const index of [0 + 5, 17, sealed.length - 1]) {
      const flipped = Buffer.from(sealed);
      flipped[index]! ^= 1;
      expect(open(v1, flipped, aad)).toBeNull();
    }
    const otherVersion = Buffer.from(sealed);
    otherVersion.writeUInt32BE(2, 1);
    expect(open(v1, otherVersion, aad)).toBeNull();
    expect(open(versionKey(algorithm, secret.export(), keyId.toString(), 2), otherVersion, aad)).toBeNull();
    expect(open(v1, sealed.subarray(0, sealed.length - 1), aad)).toBeNull();
    expect(open(v1, sealed.subarray(0, 20), aad)).toBeNull();
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
