import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

// A real gRPC client (@grpc/grpc-js, messages from the .proto) for what h2load cannot do: create the key, fetch
// real ciphertexts, and check each server's answers end to end, trailers and all.

const definition = protoLoader.loadSync("kms/v1/kms.proto", { includeDirs: ["proto"], keepCase: false, longs: String, enums: String, defaults: true, oneofs: true });
const service = definition["kms.v1.KeyManagerService"] as protoLoader.ServiceDefinition;

export interface CryptoKeyReply {
  id: string;
  primary: { id: number; algorithm: string } | null;
}

export interface EncryptReply {
  keyId: string;
  keyVersionId: number;
  ciphertext: Buffer;
}

export interface DecryptReply {
  keyId: string;
  keyVersionId: number;
  plaintext: Buffer;
}

export class KmsClient {
  private readonly client: grpc.Client;

  private readonly metadata = new grpc.Metadata();

  // `authorization` is sent with every call ("Bearer <token>").
  constructor(port: number, authorization: string) {
    this.client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    this.metadata.set("authorization", authorization);
  }

  // `raw` leaves the response message undecoded: its bytes, as they came.
  private call<Res>(method: string, request: object, raw = false): Promise<Res> {
    const m = service[method];
    if (m === undefined) throw new Error(`no method ${method}`);
    return new Promise<Res>((resolve, reject) => {
      this.client.makeUnaryRequest(
        m.path,
        m.requestSerialize,
        raw ? (b: Buffer) => b as Res : (m.responseDeserialize as (b: Buffer) => Res),
        request,
        this.metadata,
        { deadline: Date.now() + 10_000 },
        (err, value) => (err !== null || value === undefined ? reject(err ?? new Error(`${method}: no response`)) : resolve(value)),
      );
    });
  }

  createCryptoKey(parentId: string): Promise<CryptoKeyReply> {
    return this.call("CreateCryptoKey", { parentId, name: "bench", defaultAlgorithm: "AES_256" });
  }

  encrypt(keyId: string, keyVersionId: number, plaintext: Uint8Array): Promise<EncryptReply> {
    return this.call("Encrypt", { keyId, keyVersionId, plaintext });
  }

  decrypt(keyId: string, ciphertext: Uint8Array, additionalAuthenticatedData?: Uint8Array): Promise<DecryptReply> {
    return this.call("Decrypt", { keyId, ciphertext, additionalAuthenticatedData });
  }

  // The CryptoKey message as the server encoded it: the bench checks its content and its size.
  getCryptoKeyBytes(keyId: string): Promise<Buffer> {
    return this.call("GetCryptoKey", { keyId }, true);
  }

  close(): void {
    this.client.close();
  }
}
