import { createCipheriv, createDecipheriv, randomFillSync } from "node:crypto";
import type { KeyObject } from "node:crypto";
import type { Algorithm } from "./model.js";

// Ciphertext layout, self-describing and opaque to callers:
//   [0]      format byte (1)
//   [1..5)   key version id, uint32 big-endian
//   [5..17)  96-bit random nonce
//   [17..n-16) AES-GCM output
//   [n-16..n) GCM tag
// The GCM additional data is header || uint16 length of key id || key id || caller AAD, so a ciphertext never
// decrypts under another key, another version or with other AAD.
const FORMAT = 1;
const HEADER_BYTES = 5;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const OVERHEAD = HEADER_BYTES + NONCE_BYTES + TAG_BYTES;

const gcmNames: Record<Algorithm, "aes-128-gcm" | "aes-192-gcm" | "aes-256-gcm"> = {
  AES_128: "aes-128-gcm",
  AES_192: "aes-192-gcm",
  AES_256: "aes-256-gcm",
};

// Nonces come from a pool of CSPRNG output, refilled every 4096 nonces: one call into OpenSSL per refill instead
// of one per Encrypt. Each byte of the pool is used once, so nonces stay 96 random bits. Nonces are not secret
// (every ciphertext carries its own), so the pool needs no wiping.
const NONCE_POOL = Buffer.allocUnsafe(NONCE_BYTES * 4096);
let nonceOffset = NONCE_POOL.length;

function takeNonce(target: Buffer, at: number): void {
  if (nonceOffset === NONCE_POOL.length) {
    randomFillSync(NONCE_POOL);
    nonceOffset = 0;
  }
  NONCE_POOL.copy(target, at, nonceOffset, nonceOffset + NONCE_BYTES);
  nonceOffset += NONCE_BYTES;
}

function additionalData(header: Uint8Array, keyId: Buffer, aad: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(HEADER_BYTES + 2 + keyId.length + aad.length);
  out.set(header, 0);
  out.writeUInt16BE(keyId.length, HEADER_BYTES);
  keyId.copy(out, HEADER_BYTES + 2);
  out.set(aad, HEADER_BYTES + 2 + keyId.length);
  return out;
}

export function seal(
  algorithm: Algorithm,
  key: KeyObject,
  keyId: Buffer,
  versionId: number,
  plaintext: Uint8Array,
  aad: Uint8Array,
): Uint8Array {
  // One allocation for the whole result; the cipher writes straight into it.
  const out = Buffer.allocUnsafe(OVERHEAD + plaintext.length);
  out[0] = FORMAT;
  out.writeUInt32BE(versionId, 1);
  takeNonce(out, HEADER_BYTES);
  const nonce = out.subarray(HEADER_BYTES, HEADER_BYTES + NONCE_BYTES);
  const cipher = createCipheriv(gcmNames[algorithm], key, nonce);
  cipher.setAAD(additionalData(out.subarray(0, HEADER_BYTES), keyId, aad));
  const body = cipher.update(plaintext);
  body.copy(out, HEADER_BYTES + NONCE_BYTES);
  let offset = HEADER_BYTES + NONCE_BYTES + body.length;
  const rest = cipher.final();
  rest.copy(out, offset);
  offset += rest.length;
  cipher.getAuthTag().copy(out, offset);
  return out;
}

// The version a ciphertext claims to be made with, or null when it cannot be a ciphertext of ours.
export function ciphertextVersion(ciphertext: Uint8Array): number | null {
  if (ciphertext.length < OVERHEAD || ciphertext[0] !== FORMAT) return null;
  const view = Buffer.from(ciphertext.buffer, ciphertext.byteOffset, ciphertext.byteLength);
  const version = view.readUInt32BE(1);
  return version >= 1 ? version : null;
}

// Returns null when authentication fails; callers answer every failure with the same message so the result
// is no oracle.
export function open(
  algorithm: Algorithm,
  key: KeyObject,
  keyId: Buffer,
  ciphertext: Uint8Array,
  aad: Uint8Array,
): Uint8Array | null {
  const n = ciphertext.length;
  const decipher = createDecipheriv(gcmNames[algorithm], key, ciphertext.subarray(HEADER_BYTES, HEADER_BYTES + NONCE_BYTES));
  decipher.setAAD(additionalData(ciphertext.subarray(0, HEADER_BYTES), keyId, aad));
  decipher.setAuthTag(ciphertext.subarray(n - TAG_BYTES));
  const body = decipher.update(ciphertext.subarray(HEADER_BYTES + NONCE_BYTES, n - TAG_BYTES));
  try {
    const rest = decipher.final();
    return rest.length === 0 ? body : Buffer.concat([body, rest]);
  } catch {
    return null;
  }
}
