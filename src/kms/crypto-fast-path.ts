import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { fastUnary } from "../transport/grpc/unary-fast-path.js";
import type { FastUnaryMethod } from "../transport/grpc/unary-fast-path.js";
import type { CryptoHandlers } from "./crypto-handlers.js";
import { sealInto, sealedLength } from "./ciphertext.js";
import { cryptoResponseFrame, frameCryptoResponse } from "./crypto-response-frame.js";

function framed<R>(result: R | Promise<R>, frame: (r: R) => Buffer): Buffer | Promise<Buffer> {
  return result instanceof Promise ? result.then(frame) : frame(result);
}

// Encrypt and Decrypt on the gRPC fast path: the same handlers as the Connect service, their responses written
// straight into the gRPC frame (Encrypt's ciphertext is sealed into it, so it is written once).
export function cryptoFastMethods(crypto: CryptoHandlers): FastUnaryMethod[] {
  return [
    fastUnary(KeyManagerService.method.encrypt, (req) =>
      framed(crypto.sealingKey(req), (key) => {
        const length = sealedLength(req.plaintext.length);
        const frame = cryptoResponseFrame(req.keyId, req.keyVersionId, length);
        sealInto(frame, frame.length - length, key, req.plaintext, req.additionalAuthenticatedData);
        return frame;
      }),
    ),
    fastUnary(KeyManagerService.method.decrypt, (req) =>
      framed(crypto.decrypt(req), (r) => frameCryptoResponse(r.keyId, r.keyVersionId, r.plaintext)),
    ),
  ];
}
