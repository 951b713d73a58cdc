import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  DecryptRequestSchema,
  DecryptResponseSchema,
  EncryptRequestSchema,
  EncryptResponseSchema,
} from "../../gen/kms/v1/kms_pb.js";

// The request bodies h2load posts: one gRPC length-prefixed message (flag 0, uint32 big-endian length, the
// protobuf bytes), and the size a correct answer has, to check that h2load's 200s were real answers.

export function grpcFrame(message: Uint8Array): Buffer {
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}

export interface Body {
  file: string;
  // Bytes of the framed response message a correct answer carries.
  responseBytes: number;
}

export function encryptBody(dir: string, name: string, keyId: string, keyVersionId: number, plaintext: Uint8Array): Body {
  const file = join(dir, `${name}.bin`);
  writeFileSync(file, grpcFrame(toBinary(EncryptRequestSchema, create(EncryptRequestSchema, { keyId, keyVersionId, plaintext }))));
  const ciphertext = new Uint8Array(plaintext.length + 33);
  const response = toBinary(EncryptResponseSchema, create(EncryptResponseSchema, { keyId, keyVersionId, ciphertext }));
  return { file, responseBytes: 5 + response.length };
}

export function decryptBody(dir: string, name: string, keyId: string, ciphertext: Uint8Array, plaintextBytes: number): Body {
  const file = join(dir, `${name}.bin`);
  writeFileSync(file, grpcFrame(toBinary(DecryptRequestSchema, create(DecryptRequestSchema, { keyId, ciphertext }))));
  const plaintext = new Uint8Array(plaintextBytes);
  const response = toBinary(DecryptResponseSchema, create(DecryptResponseSchema, { keyId, keyVersionId: 1, plaintext }));
  return { file, responseBytes: 5 + response.length };
}
