import { createCipheriv, createDecipheriv, randomFillSync } from "node:crypto";
import { MAX_ID_CHARS } from "../errors/violation-list.js";
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

// One ENABLED key version, ready to seal and open. The cache's versions are VersionKeys themselves (packed-keys.ts,
// cached-key.ts), whose material is read per call and good for that call's synchronous turn; `versionKey` makes one
// with a buffer of its own. The material is in a plain buffer rather than a KeyObject: a KeyObject costs
// about 0.9 KB of native memory each, more than everything else of a cached key together, and OpenSSL runs the
// key schedule on every createCipheriv either way.
export interface VersionKey {
  readonly algorithm: Algorithm;
  readonly versionId: number;
  readonly keyId: string;
  // Exactly the algorithm's key length (createCipheriv refuses any other).
  readonly material: Uint8Array;
}

export function versionKey(algorithm: Algorithm, material: Uint8Array, keyId: string, versionId: number): VersionKey {
  return { algorithm, versionId, keyId, material: Buffer.from(material) };
}

// The part of the GCM additional data after the ciphertext's header that is the same for every ciphertext of a
// key: uint16 length of the key id || the key id, UTF-8. Written per call into one scratch buffer, which setAAD
// copies at once; an id longer than ids may be (none the server makes) gets a buffer of its own.
const idScratch = Buffer.allocUnsafeSlow(2 + 3 * MAX_ID_CHARS);

function keyIdPart(keyId: string): Buffer {
  if (keyId.length > MAX_ID_CHARS) {
    const id = Buffer.from(keyId);
    const length = Buffer.allocUnsafe(2);
    length.writeUInt16BE(id.length, 0);
    return Buffer.concat([length, id]);
  }
  const n = idScratch.write(keyId, 2, "utf8");
  idScratch.writeUInt16BE(n, 0);
  return idScratch.subarray(0, 2 + n);
}

// The size of the ciphertext of a plaintext of this size.
export function sealedLength(plaintextBytes: number): number {
  return OVERHEAD + plaintextBytes;
}

// Writes the ciphertext into out[at, at + sealedLength(plaintext.length)), for a caller that has the buffer the
// ciphertext goes out in.
export function sealInto(out: Buffer, at: number, key: VersionKey, plaintext: Uint8Array, aad: Uint8Array): void {
  out[at] = FORMAT;
  out.writeUInt32BE(key.versionId, at + 1);
  takeNonce(out, at + HEADER_BYTES);
  const cipher = createCipheriv(gcmNames[key.algorithm], key.material, out.subarray(at + HEADER_BYTES, at + HEADER_BYTES + NONCE_BYTES));
  cipher.setAAD(out.subarray(at, at + HEADER_BYTES));
  cipher.setAAD(keyIdPart(key.keyId));
  if (aad.length > 0) cipher.setAAD(aad);
  let offset = at + HEADER_BYTES + NONCE_BYTES;
  offset += cipher.update(plaintext).copy(out, offset);
  offset += cipher.final().copy(out, offset);
  cipher.getAuthTag().copy(out, offset);
}

export function seal(key: VersionKey, plaintext: Uint8Array, aad: Uint8Array): Uint8Array {
  const out = Buffer.allocUnsafe(sealedLength(plaintext.length));
  sealInto(out, 0, key, plaintext, aad);
  return out;
}

// The version a ciphertext claims to be made with, or null when it cannot be a ciphertext of ours.
export function ciphertextVersion(ciphertext: Uint8Array): number | null {
  if (ciphertext.length < OVERHEAD || ciphertext[0] !== FORMAT) return null;
  const view = Buffer.from(ciphertext.buffer, ciphertext.byteOffset, ciphertext.byteLength);
  const version = view.readUInt32BE(1);
  return version >= 1 ? version : null;
}

// Opens a ciphertext of `key`'s version (as ciphertextVersion named it): its header is then the version's own, so
// header and key id are exactly the additional data it was sealed with. Returns null when authentication fails;
// callers answer every failure with the same message so the result is no oracle.
export function open(key: VersionKey, ciphertext: Uint8Array, aad: Uint8Array): Uint8Array | null {
  const n = ciphertext.length;
  if (ciphertextVersion(ciphertext) !== key.versionId) return null;
  const decipher = createDecipheriv(gcmNames[key.algorithm], key.material, ciphertext.subarray(HEADER_BYTES, HEADER_BYTES + NONCE_BYTES));
  // The header is the version's own (checked above), so it is the header the ciphertext was sealed with.
  decipher.setAAD(ciphertext.subarray(0, HEADER_BYTES));
  decipher.setAAD(keyIdPart(key.keyId));
  if (aad.length > 0) decipher.setAAD(aad);
  decipher.setAuthTag(ciphertext.subarray(n - TAG_BYTES));
  const body = decipher.update(ciphertext.subarray(HEADER_BYTES + NONCE_BYTES, n - TAG_BYTES));
  try {
    const rest = decipher.final();
    return rest.length === 0 ? body : Buffer.concat([body, rest]);
  } catch {
    return null;
  }
}
