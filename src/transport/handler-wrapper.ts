import type { JsonWriteOptions } from "@bufbuild/protobuf";
import { ConnectError, createContextValues } from "@connectrpc/connect";
import { createAsyncIterable, encodeEnvelope, readAllBytes } from "@connectrpc/connect/protocol";
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { codeToHttpStatus, contentTypeUnaryRegExp, errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { contentTypeRegExp as grpcContentType, findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { contentTypeRegExp as grpcWebContentType, trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { completeProtocolError } from "../errors/to-connect-error.js";
import { requestIdOf } from "./call-outcome.js";
import { requestIdKey } from "./context.js";
import { grpcStatusHeaders } from "./grpc/grpc-status.js";

const ENVELOPE_BYTES = 5;

// Wraps one of the Connect router's handlers: every call gets its request id here (the interceptor and the
// services read it from contextValues, the response carries it as x-request-id), and errors that Connect's
// protocol layer answers on its own, before any interceptor runs (an undecodable or oversized message, an
// unknown compression), get the ErrorInfo every error of ours carries. Each protocol keeps its own error
// encoding: the Connect unary error JSON, gRPC trailers, the gRPC-web trailer frame.
export function wrapHandler(handler: UniversalHandler, jsonOptions: Partial<JsonWriteOptions>): UniversalHandler {
  const wrapped = async (req: UniversalServerRequest): Promise<UniversalServerResponse> => {
    const requestId = requestIdOf(req.header.get("x-request-id"));
    (req.contextValues ??= createContextValues()).set(requestIdKey, requestId);
    const res = await handler(req);
    // Copied: Connect answers some requests with shared response objects (415, 405) that must not change.
    const header = new Headers(res.header);
    header.set("x-request-id", requestId);
    const contentType = req.header.get("content-type") ?? "";
    if (res.body === undefined) return { ...res, header };
    if (grpcWebContentType.test(contentType)) return { ...res, header, body: completeGrpcWebTrailer(res.body) };
    if (grpcContentType.test(contentType)) {
      return res.trailer === undefined ? { ...res, header } : { ...res, header, body: completeGrpcTrailer(res.body, res.trailer) };
    }
    if (contentTypeUnaryRegExp.test(contentType) && res.status !== 200 && !header.has("content-encoding")) {
      return completeConnectError(res.body, res.status, header, jsonOptions);
    }
    return { ...res, header };
  };
  return Object.assign(wrapped, {
    protocolNames: handler.protocolNames,
    service: handler.service,
    method: handler.method,
    requestPath: handler.requestPath,
    allowedMethods: handler.allowedMethods,
    supportedContentType: handler.supportedContentType,
  });
}

// The status of a failed call, completed and with grpc-message encoded as grpc-status.ts explains; the other
// entries (x-request-id ...) stay as they are. Returns whether the call failed, i.e. whether anything was set.
function completeGrpcStatus(trailer: Headers): boolean {
  const error = findTrailerError(trailer);
  if (error === undefined) return false;
  grpcStatusHeaders(completeProtocolError(error)).forEach((value, key) => trailer.set(key, value));
  return true;
}

// gRPC: the status is in the trailers, which Connect fills in as the body ends and the adapter writes after it.
async function* completeGrpcTrailer(body: AsyncIterable<Uint8Array>, trailer: Headers): AsyncIterable<Uint8Array> {
  yield* body;
  completeGrpcStatus(trailer);
}

// gRPC-web: the status is in the last frame of the body; Connect yields each frame as one chunk.
async function* completeGrpcWebTrailer(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  for await (const chunk of body) {
    const isTrailerFrame =
      chunk.length >= ENVELOPE_BYTES &&
      chunk[0] === trailerFlag &&
      new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength).getUint32(1) === chunk.length - ENVELOPE_BYTES;
    if (!isTrailerFrame) {
      yield chunk;
      continue;
    }
    const trailer = trailerParse(chunk.subarray(ENVELOPE_BYTES));
    // A successful call's trailer frame goes out as Connect wrote it.
    yield completeGrpcStatus(trailer) ? encodeEnvelope(trailerFlag, trailerSerialize(trailer)) : chunk;
  }
}

// Connect unary: an error is the JSON body of a non-200 response.
async function completeConnectError(
  body: AsyncIterable<Uint8Array>,
  status: number,
  header: Headers,
  jsonOptions: Partial<JsonWriteOptions>,
): Promise<UniversalServerResponse> {
  const bytes = await readAllBytes(body, Number.MAX_SAFE_INTEGER);
  let json: Uint8Array;
  try {
    const error = completeProtocolError(errorFromJsonBytes(bytes, undefined, new ConnectError("not an error body")));
    json = errorToJsonBytes(error, jsonOptions);
    // Completing may change the code (a caller's undecodable message that Connect called INTERNAL); the HTTP
    // status follows the code the body now says.
    status = codeToHttpStatus(error.code);
  } catch {
    // Not Connect's error JSON (it always is): passed on as it came.
    json = bytes;
  }
  header.set("content-length", String(json.byteLength));
  return { status, header, body: createAsyncIterable([json]) };
}
