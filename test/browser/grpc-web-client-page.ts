// Bundled by grpc-web-client.test.ts and loaded from another origin than the API server's: calls the server with
// the grpc-web JavaScript client (the `grpc-web` package) in its default text mode (application/grpc-web-text), as
// a web application built with protoc-gen-grpc-web would. Its generated stubs are a MethodDescriptor per method and
// the message classes of google-protobuf; here the descriptors take protobuf-es's encoders instead.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { DescMethodServerStreaming, DescMethodUnary, DescMessage, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { GrpcWebClientBase, MethodDescriptor } from "grpc-web";
import type { RpcError } from "grpc-web";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";

export interface GrpcWebClientResult {
  ok: boolean;
  // What the calls gave: the decrypted text, the refused Decrypt's code and message, the first health status.
  detail: string;
}

declare global {
  interface Window {
    callWithGrpcWeb(baseUrl: string, token: string): Promise<GrpcWebClientResult>;
  }
}

function descriptor<I extends DescMessage, O extends DescMessage>(
  method: DescMethodUnary<I, O> | DescMethodServerStreaming<I, O>,
): MethodDescriptor<MessageShape<I>, MessageShape<O>> {
  const kind = method.methodKind === "unary" ? "unary" : "server_streaming";
  return new MethodDescriptor(
    `/${method.parent.typeName}/${method.name}`,
    kind,
    Object as never,
    Object as never,
    (request: MessageShape<I>) => toBinary(method.input, request),
    (bytes: Uint8Array) => fromBinary(method.output, bytes),
  );
}

window.callWithGrpcWeb = async (baseUrl, token) => {
  // The client's default format is "text"; said here so that the test does not depend on the default.
  const client = new GrpcWebClientBase({ format: "text" });
  const metadata = { authorization: `Bearer ${token}` };
  const unary = <I extends DescMessage, O extends DescMessage>(method: DescMethodUnary<I, O>, init: MessageInitShape<I>): Promise<MessageShape<O>> =>
    client.unaryCall(`${baseUrl}/${method.parent.typeName}/${method.name}`, create(method.input, init), metadata, descriptor(method));
  const kms = KeyManagerService.method;
  try {
    const key = await unary(kms.createCryptoKey, { parentId: "grpc-web-client", name: "text-mode" });
    const sealed = await unary(kms.encrypt, { keyId: key.id, keyVersionId: 1, plaintext: new TextEncoder().encode("hello in text mode") });
    const opened = await unary(kms.decrypt, { keyId: key.id, ciphertext: sealed.ciphertext });
    const refused = await unary(kms.decrypt, { keyId: key.id, ciphertext: sealed.ciphertext.slice(0, 20) }).then(
      () => "not refused",
      (err: RpcError) => `${err.code} ${err.message}`,
    );
    // A server stream: the first status of the key service, then the call is cancelled.
    const watched = await new Promise<string>((resolve, reject) => {
      const watch = Health.method.watch;
      const stream = client.serverStreaming(`${baseUrl}/${watch.parent.typeName}/${watch.name}`, create(watch.input, { service: "kms.v1.KeyManagerService" }), {}, descriptor(watch));
      stream.on("data", (response) => {
        stream.cancel();
        resolve(String(response.status));
      });
      stream.on("error", (err: RpcError) => reject(new Error(`${err.code} ${err.message}`)));
    });
    return { ok: true, detail: `${new TextDecoder().decode(opened.plaintext)} | ${refused} | watch ${watched}` };
  } catch (err) {
    const e = err as { code?: number; message?: string };
    return { ok: false, detail: `${e.code ?? "?"} ${e.message ?? String(err)}` };
  }
};
