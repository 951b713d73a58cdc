import { DecryptResponseSchema, EncryptResponseSchema, KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import type { DecryptResponse, EncryptResponse } from "../../gen/kms/v1/kms_pb.js";
import type { MethodTable } from "../pipeline/method-table.js";
import type { MethodEntry } from "../pipeline/method-table.js";
import type { ResponseEncoder } from "../transport/grpc/grpc-unary-adapter.js";
import { frameLayout, frameResponse } from "./crypto-response-frame.js";

// The gRPC frame encoders of Encrypt and Decrypt, whose payload is most of every call's bytes. Their layouts are
// checked against the schema here, at start-up.
export function cryptoEncoders(table: MethodTable): Map<MethodEntry, ResponseEncoder> {
  const encrypt = frameLayout(EncryptResponseSchema, "keyId", "keyVersionId", "ciphertext");
  const decrypt = frameLayout(DecryptResponseSchema, "keyId", "keyVersionId", "plaintext");
  type Shape<T> = Pick<T, Exclude<keyof T, "$typeName" | "$unknown">>;
  return new Map<MethodEntry, ResponseEncoder>([
    [
      table.of(KeyManagerService.method.encrypt),
      (r) => {
        const res = r as Shape<EncryptResponse>;
        return frameResponse(encrypt, res.keyId, res.keyVersionId, res.ciphertext);
      },
    ],
    [
      table.of(KeyManagerService.method.decrypt),
      (r) => {
        const res = r as Shape<DecryptResponse>;
        return frameResponse(decrypt, res.keyId, res.keyVersionId, res.plaintext);
      },
    ],
  ]);
}
