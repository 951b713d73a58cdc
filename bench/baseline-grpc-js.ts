import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { ciphertextVersion, open, seal } from "../src/kms/ciphertext.js";
import { baselineKeys, baselinePort } from "./baseline-key.js";

// Baseline 1: a plain @grpc/grpc-js server, as its documentation builds one (service from the .proto through
// proto-loader, protobufjs serialization, default channel options and so default 65,535-byte windows), doing the
// same AES-256-GCM seal/open as cloudplane, and answering GetCryptoKey with the same CryptoKey message cloudplane
// gives for the bench's key, held in memory. cloudplane must serve at least 1.2x its requests per second (2x at
// 64 KiB, where grpc-js's default windows and copies cost it most).

interface EncryptRequest {
  keyId?: string;
  keyVersionId?: number;
  plaintext?: Buffer;
  additionalAuthenticatedData?: Buffer;
}

interface GetCryptoKeyRequest {
  keyId?: string;
}

interface DecryptRequest {
  keyId?: string;
  ciphertext?: Buffer;
  additionalAuthenticatedData?: Buffer;
}

// proto-loader with defaults off leaves absent fields undefined, so absent bytes read as this.
const EMPTY = Buffer.alloc(0);

const keys = baselineKeys(process.env);
const definition = protoLoader.loadSync("kms/v1/kms.proto", { includeDirs: ["proto"], keepCase: false, longs: String, enums: String, defaults: false, oneofs: true });
const kms = grpc.loadPackageDefinition(definition) as unknown as { kms: { v1: { KeyManagerService: { service: grpc.ServiceDefinition } } } };

// The CryptoKey cloudplane answers for the key the bench creates (CreateCryptoKey with parent "bench", name
// "bench" and nothing else, by an anonymous caller): every field it sets, set here, so both servers encode a
// message of the same size (100 bytes with a 20-character key id; the bench checks the fields of each answer).
// Built once: grpc-js serializes it on every call, as it does any object a handler returns.
interface Timestamp {
  seconds: number;
  nanos: number;
}

function timestamp(ms: number): Timestamp {
  return { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1_000_000 };
}

const createdAt = timestamp(Date.now());
const cryptoKeys = new Map(
  [...keys.values()].map((key) => [
    key.id,
    {
      id: key.id,
      name: "bench",
      owner: "anonymous",
      primary: { id: key.versionId, keyId: key.id, state: "ENABLED", algorithm: "AES_256", createdAt },
      defaultAlgorithm: "AES_256",
      createdAt,
    },
  ]),
);

function failure(code: grpc.status, details: string): Partial<grpc.ServiceError> {
  return { code, details };
}

const implementation: grpc.UntypedServiceImplementation = {
  Encrypt(call: grpc.ServerUnaryCall<EncryptRequest, unknown>, callback: grpc.sendUnaryData<unknown>) {
    const req = call.request;
    const key = keys.get(req.keyId ?? "");
    if (key === undefined || req.keyVersionId !== key.versionId) return callback(failure(grpc.status.NOT_FOUND, "key version not found"));
    const plaintext = req.plaintext ?? EMPTY;
    if (plaintext.length === 0 || plaintext.length > 65536) return callback(failure(grpc.status.INVALID_ARGUMENT, "bad plaintext"));
    const ciphertext = seal(key.key, plaintext, req.additionalAuthenticatedData ?? EMPTY);
    callback(null, { keyId: key.id, keyVersionId: key.versionId, ciphertext });
  },
  GetCryptoKey(call: grpc.ServerUnaryCall<GetCryptoKeyRequest, unknown>, callback: grpc.sendUnaryData<unknown>) {
    const key = cryptoKeys.get(call.request.keyId ?? "");
    if (key === undefined) return callback(failure(grpc.status.NOT_FOUND, "key not found"));
    callback(null, key);
  },
  Decrypt(call: grpc.ServerUnaryCall<DecryptRequest, unknown>, callback: grpc.sendUnaryData<unknown>) {
    const req = call.request;
    const key = keys.get(req.keyId ?? "");
    if (key === undefined) return callback(failure(grpc.status.NOT_FOUND, "key not found"));
    const ciphertext = req.ciphertext ?? EMPTY;
    if (ciphertextVersion(ciphertext) !== key.versionId) return callback(failure(grpc.status.INVALID_ARGUMENT, "invalid ciphertext"));
    const plaintext = open(key.key, ciphertext, req.additionalAuthenticatedData ?? EMPTY);
    if (plaintext === null) return callback(failure(grpc.status.INVALID_ARGUMENT, "invalid ciphertext"));
    callback(null, { keyId: key.id, keyVersionId: key.versionId, plaintext });
  },
};

const server = new grpc.Server();
server.addService(kms.kms.v1.KeyManagerService.service, implementation);
server.bindAsync(`127.0.0.1:${baselinePort(process.env)}`, grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err !== null) {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`${JSON.stringify({ listening: port })}\n`);
});

// A clean exit on SIGTERM, so that a --cpu-prof profile gets written.
process.on("SIGTERM", () => process.exit(0));
