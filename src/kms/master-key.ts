import { createCipheriv, createDecipheriv, createHmac, createSecretKey, randomBytes } from "node:crypto";
import type { KeyObject } from "node:crypto";

const NONCE_BYTES = 12;
const TAG_BYTES = 16;

// Wraps key material with AES-256-GCM under the server's master key before it reaches storage. The row's
// identity (key id and version id) is the additional data, so a wrapped blob copied to another row does not
// unwrap.
export class MasterKey {
  private readonly key: KeyObject;

  constructor(material: Uint8Array) {
    if (material.length !== 32) throw new Error("the master key must be 32 bytes");
    this.key = createSecretKey(material);
  }

  wrap(material: Uint8Array, keyId: string, versionId: number): Uint8Array {
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.key, nonce);
    cipher.setAAD(Buffer.from(`${keyId}/${versionId}`));
    const body = Buffer.concat([cipher.update(material), cipher.final()]);
    return Buffer.concat([nonce, body, cipher.getAuthTag()]);
  }

  unwrap(wrapped: Uint8Array, keyId: string, versionId: number): Uint8Array {
    const n = wrapped.length;
    const decipher = createDecipheriv("aes-256-gcm", this.key, wrapped.subarray(0, NONCE_BYTES));
    decipher.setAAD(Buffer.from(`${keyId}/${versionId}`));
    decipher.setAuthTag(wrapped.subarray(n - TAG_BYTES));
    // A failure here means the master key is wrong or storage was altered: a server fault, not the caller's.
    return Buffer.concat([decipher.update(wrapped.subarray(NONCE_BYTES, n - TAG_BYTES)), decipher.final()]);
  }

  // HMAC-SHA256 of `data` under the master key: how the check value stored with the data is made
  // (master-key-check.ts). It tells whether a key is the right one without storing anything of the key itself.
  mac(data: Uint8Array): Buffer {
    return createHmac("sha256", this.key).update(data).digest();
  }
}
