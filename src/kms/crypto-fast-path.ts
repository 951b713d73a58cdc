import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { fastUnary } from "../transport/grpc/unary-fast-path.js";
import type { FastUnaryMethod } from "../transport/grpc/unary-fast-path.js";
import type { CryptoHandlers } from "./crypto-handlers.js";
import { frameCryptoResponse } from "./crypto-response-frame.js";

function framed<R>(result: R | Promise<R>, frame: (r: R) => Buffer): Buffer | Promise<Buffer> {
  return result instanceof Promise ? result.then(frame) : frame(result);
}

// Encrypt and Decrypt on the gRPC fast path: the same handlers as the Connect service, their responses written
// straight into the gRPC frame.
export function cryptoFastMethods(crypto: CryptoHandlers): FastUnaryMethod[] {
  return [
    fastUnary(KeyManagerService.method.encrypt, (req) =>
      framed(crypto.encrypt(req), (r) => frameCryptoResponse(r.keyId, r.keyVersionId, r.ciphertext)),
    ),
    fastUnary(KeyManagerService.method.decrypt, (req) =>
      framed(crypto.decrypt(req), (r) => frameCryptoResponse(r.keyId, r.keyVersionId, r.plaintext)),
    ),
  ];
}
