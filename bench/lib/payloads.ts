import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  DecryptRequestSchema,
  DecryptResponseSchema,
  EncryptRequestSchema,
  EncryptResponseSchema,
  GetCryptoKeyRequestSchema,
} from "../../gen/kms/v1/kms_pb.js";

// The request bodies h2load posts, and the size a correct answer has, to check that h2load's 200s were real
// answers: one gRPC length-prefixed message (flag 0, uint32 big-endian length, the protobuf bytes) for gRPC and
// gRPC-web, proto-JSON for REST and Connect.

// Bytes of an Encrypt ciphertext: format byte, version id, nonce and tag around the sealed plaintext.
const CIPHERTEXT_OVERHEAD = 33;

export function grpcFrame(message: Uint8Array): Buffer {
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}

export interface Body {
  // Null for a GET.
  file: string | null;
  // Bytes of the response message a correct answer carries: framed for gRPC and gRPC-web, the JSON for REST and
  // Connect.
  responseBytes: number;
}

export function encryptBody(dir: string, name: string, keyId: string, keyVersionId: number, plaintext: Uint8Array): Body {
  const file = join(dir, `${name}.bin`);
  writeFileSync(file, grpcFrame(toBinary(EncryptRequestSchema, create(EncryptRequestSchema, { keyId, keyVersionId, plaintext }))));
  const ciphertext = new Uint8Array(plaintext.length + CIPHERTEXT_OVERHEAD);
  const response = toBinary(EncryptResponseSchema, create(EncryptResponseSchema, { keyId, keyVersionId, ciphertext }));
  return { file, responseBytes: 5 + response.length };
}

// gRPC-web's text form of encryptBody: the same frame in base64, answered with the message frame in base64.
export function textEncryptBody(dir: string, name: string, keyId: string, keyVersionId: number, plaintext: Uint8Array): Body {
  const binary = encryptBody(dir, name, keyId, keyVersionId, plaintext);
  writeFileSync(binary.file!, readFileSync(binary.file!).toString("base64"));
  return { file: binary.file, responseBytes: Math.ceil(binary.responseBytes / 3) * 4 };
}

// `answerBytes`: the size of the CryptoKey message this server answered in the check before the load.
export function getCryptoKeyBody(dir: string, name: string, keyId: string, answerBytes: number): Body {
  const file = join(dir, `${name}.bin`);
  writeFileSync(file, grpcFrame(toBinary(GetCryptoKeyRequestSchema, create(GetCryptoKeyRequestSchema, { keyId }))));
  return { file, responseBytes: 5 + answerBytes };
}

// REST and Connect take the same proto-JSON for Encrypt; REST's also carries additional authenticated data, so
// that both sides of the REST comparison decode two base64 fields, as a real caller's request makes them.
export function jsonEncryptBody(dir: string, name: string, keyId: string, plaintext: Uint8Array, aad: Uint8Array | null): Body {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(jsonEncryptRequest(keyId, plaintext, aad)));
  const ciphertext = Buffer.alloc(plaintext.length + CIPHERTEXT_OVERHEAD).toString("base64");
  return { file, responseBytes: JSON.stringify({ keyId, keyVersionId: 1, ciphertext }).length };
}

export function jsonEncryptRequest(keyId: string, plaintext: Uint8Array, aad: Uint8Array | null): object {
  const request = { keyId, keyVersionId: 1, plaintext: Buffer.from(plaintext).toString("base64") };
  return aad === null ? request : { ...request, additionalAuthenticatedData: Buffer.from(aad).toString("base64") };
}

export function decryptBody(dir: string, name: string, keyId: string, ciphertext: Uint8Array, plaintextBytes: number): Body {
  const file = join(dir, `${name}.bin`);
  writeFileSync(file, grpcFrame(toBinary(DecryptRequestSchema, create(DecryptRequestSchema, { keyId, ciphertext }))));
  const plaintext = new Uint8Array(plaintextBytes);
  const response = toBinary(DecryptResponseSchema, create(DecryptResponseSchema, { keyId, keyVersionId: 1, plaintext }));
  return { file, responseBytes: 5 + response.length };
}
