import type { DecryptRequest, EncryptRequest } from "../../gen/kms/v1/kms_pb.js";
import { MAX_ID_CHARS } from "../errors/violation-list.js";
import type { KeyManager } from "./key-manager.js";
import { MAX_DATA_BYTES, Violations, checkData, checkKeyId, checkVersionId } from "./request-validation.js";

type MaybePromise<T> = T | Promise<T>;

export interface EncryptResult {
  keyId: string;
  keyVersionId: number;
  ciphertext: Uint8Array;
}

export interface DecryptResult {
  keyId: string;
  keyVersionId: number;
  plaintext: Uint8Array;
}

export interface CryptoHandlers {
  encrypt(req: EncryptRequest): MaybePromise<EncryptResult>;
  decrypt(req: DecryptRequest): MaybePromise<DecryptResult>;
}

// Encrypt and Decrypt as plain functions of the request. On a cache hit they return synchronously (which the
// call pipeline keeps so), and the checks are plain comparisons that build violations only when something is wrong.
export function createCryptoHandlers(manager: KeyManager): CryptoHandlers {
  return {
    encrypt(req) {
      checkEncrypt(req);
      const sealed = manager.encrypt(req.keyId, req.keyVersionId, req.plaintext, req.additionalAuthenticatedData);
      const respond = (ciphertext: Uint8Array) => ({ keyId: req.keyId, keyVersionId: req.keyVersionId, ciphertext });
      return sealed instanceof Promise ? sealed.then(respond) : respond(sealed);
    },

    decrypt(req) {
      if (req.keyId === "" || req.keyId.length > MAX_ID_CHARS || req.ciphertext.length === 0 || req.additionalAuthenticatedData.length > MAX_DATA_BYTES) {
        const v = new Violations();
        checkKeyId(v, "keyId", req.keyId);
        // Required, and no size of its own: a ciphertext of the largest plaintext is longer than the data limit (65,569
        // bytes for 64 KiB), and one that is longer still is as invalid as a tampered one (CIPHERTEXT_INVALID). It was
        // checked as data, so a valid one of the largest plaintext was named too long beside any other violation.
        if (req.ciphertext.length === 0) v.add("ciphertext", "is required and must not be empty");
        checkData(v, "additionalAuthenticatedData", req.additionalAuthenticatedData, false);
        v.throwIfAny();
      }
      const opened = manager.decrypt(req.keyId, req.ciphertext, req.additionalAuthenticatedData);
      const respond = (r: { versionId: number; plaintext: Uint8Array }) => ({
        keyId: req.keyId,
        keyVersionId: r.versionId,
        plaintext: r.plaintext,
      });
      return opened instanceof Promise ? opened.then(respond) : respond(opened);
    },
  };
}

function checkEncrypt(req: EncryptRequest): void {
  if (
    req.keyId === "" ||
    req.keyId.length > MAX_ID_CHARS ||
    req.keyVersionId < 1 ||
    req.plaintext.length === 0 ||
    req.plaintext.length > MAX_DATA_BYTES ||
    req.additionalAuthenticatedData.length > MAX_DATA_BYTES
  ) {
    const v = new Violations();
    checkKeyId(v, "keyId", req.keyId);
    checkVersionId(v, req.keyVersionId);
    checkData(v, "plaintext", req.plaintext, true);
    checkData(v, "additionalAuthenticatedData", req.additionalAuthenticatedData, false);
    v.throwIfAny();
  }
}
