// Bundled by cross-origin.test.ts and loaded from another origin than the API server's: calls the server with the
// generated client over gRPC-web and over Connect, as a web application elsewhere would.
import { createClient, ConnectError } from "@connectrpc/connect";
import type { Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";

export interface CrossOriginResult {
  ok: boolean;
  // On success: the key's primary version and the decrypted text; on failure the Connect code name and message.
  detail: string;
  requestId?: string | null;
}

declare global {
  interface Window {
    callApi(baseUrl: string, token: string, protocol: "grpc-web" | "connect", name: string): Promise<CrossOriginResult>;
  }
}

window.callApi = async (baseUrl, token, protocol, name) => {
  let requestId: string | null = null;
  const authorization: Interceptor = (next) => async (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    const res = await next(req);
    // Readable only when the server lists it in Access-Control-Expose-Headers.
    requestId = res.header.get("x-request-id");
    return res;
  };
  const options = { baseUrl, interceptors: [authorization] };
  const transport = protocol === "grpc-web" ? createGrpcWebTransport(options) : createConnectTransport(options);
  const kms = createClient(KeyManagerService, transport);
  try {
    const key = await kms.createCryptoKey({ parentId: "cross-origin", name });
    const sealed = await kms.encrypt({ keyId: key.id, keyVersionId: 1, plaintext: new TextEncoder().encode(`hello over ${protocol}`) });
    const opened = await kms.decrypt({ keyId: key.id, ciphertext: sealed.ciphertext });
    return { ok: true, detail: `version ${opened.keyVersionId}: ${new TextDecoder().decode(opened.plaintext)}`, requestId };
  } catch (err) {
    const e = ConnectError.from(err);
    return { ok: false, detail: `${e.code} ${e.rawMessage}` };
  }
};
