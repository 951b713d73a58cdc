import type { JsonWriteOptions } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import type { Logger } from "pino";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { malformedBody, overLimits } from "../../errors/protocol-errors.js";
import { statusPartsOf } from "../../errors/status-details.js";
import { toConnectError } from "../../errors/to-connect-error.js";
import type { ViolationList } from "../../errors/violation-list.js";
import { requestIdOf } from "../../pipeline/call.js";
import type { Call } from "../../pipeline/call.js";
import { CallError } from "../../pipeline/call-error.js";
import type { MethodTable } from "../../pipeline/method-table.js";
import { grpcStatusHeaders } from "../grpc/grpc-status.js";
import { retryAfterSeconds } from "../rest/status-json.js";
import {
  codeToHttpStatus,
  contentTypeUnaryRegExp,
  createAsyncIterable,
  encodeEnvelope,
  errorFromJsonBytes,
  errorToJsonBytes,
  findTrailerError,
  grpcContentTypeRegExp,
  grpcWebContentTypeRegExp,
  readAllBytes,
  trailerFlag,
  trailerParse,
  trailerSerialize,
} from "./connect-internals.js";
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "./connect-internals.js";
import { refusalOf } from "./connect-refusals.js";
import { countedRequest } from "./counted-body.js";
import { binaryFromText, textFromBinary } from "./grpc-web-text.js";
import type { FairTurns } from "../fair-turns.js";
import type { BodyBudget } from "../limits/body-budget.js";
import { callKey, startedKey, viaRestKey } from "./pipeline-interceptor.js";
import { capTimeoutHeaders } from "./timeout-headers.js";
import { unwrittenStatusResponse } from "./unwritten-status.js";

const ENVELOPE_BYTES = 5;

export interface WrapperSettings {
  table: MethodTable;
  jsonOptions: Partial<JsonWriteOptions>;
  maxMessageBytes: number;
  logger: Logger;
  // Where the failure of a request's body waits for a turn with room (fair-turns.ts).
  turns: FairTurns;
  // The server's budget of request bodies (body-budget.ts), which the bodies Connect reads count against.
  bodyBudget: BodyBudget;
}

// Wraps one of the Connect router's handlers, for what happens outside the interceptor (and so outside the call
// pipeline): Connect's protocol layer refuses some requests on its own, before any interceptor runs (a message
// that does not decode or is too large, an unknown compression, a passed deadline), with errors of its own words
// and without our details. Those are answered here with the same constructors the direct adapters use
// (src/errors/protocol-errors.ts), so that a caller sees the same error whichever path served the call; and every
// gRPC status goes out with grpc-message encoded as grpc-status.ts explains. The errors are told apart by their
// code and by whether the pipeline had started (our errors carry an ErrorInfo; Connect's never do), never by
// their text. Each protocol keeps its own error encoding: the Connect unary error JSON, gRPC trailers, the
// gRPC-web trailer frame; the refusals of the two carried over plain HTTP, Connect and gRPC-web, also get the HTTP
// headers of a refusal (refusalHeaders), as REST and the XML surface do. A caller's timeout is capped before Connect
// reads it, so that Connect's own deadline timer cannot overflow (timeout-headers.ts).
export function wrapHandler(handler: UniversalHandler, settings: WrapperSettings): UniversalHandler {
  const entry = settings.table.of(handler.method);
  const domain = entry.policy.domain;
  // A request over the limits of its type, counted on its bytes before Connect decodes it (counted-body.ts).
  const refuseOverLimits = (violations: ViolationList): ConnectError => toConnectError(new CallError(statusPartsOf(overLimits(domain, violations)), false), null);
  const refuseNotBase64 = (): ConnectError => toConnectError(new CallError(statusPartsOf(malformedBody(domain, "grpc-web-text")), false), null);
  const serve = async (req: UniversalServerRequest): Promise<UniversalServerResponse> => {
    const contextValues = (req.contextValues ??= createContextValues());
    // Already set for a REST call served through Connect in-process: when its headers arrived.
    contextValues.set(startedKey, contextValues.get(startedKey) ?? performance.now());
    const contentType = req.header.get("content-type") ?? "";
    // Before Connect arms its deadline timer from them (timeout-headers.ts).
    capTimeoutHeaders(req.header);
    // Decided once, before Connect reads the request: the pipeline's Call reads it from the header, so the response
    // header, the trailers or error metadata and the log line all carry this one id, whether the call failed in the
    // pipeline, in Connect's protocol layer or before either (a new id made below for each was one more id).
    const requestId = requestIdOf(req.header.get("x-request-id"));
    req.header.set("x-request-id", requestId);
    // A REST call sent through Connect in-process: its body was read, and counted, by the REST adapter.
    const budget = contextValues.get(viaRestKey) ? null : settings.bodyBudget;
    const counted = countedRequest(req, entry.limits, settings.maxMessageBytes, refuseOverLimits, settings.turns, entry.method.methodKind === "unary", budget);
    const res = await handler(counted).catch((thrown: unknown) => {
      // A gRPC status Connect failed to write (unwritten-status.ts); a caller that went away needs none.
      const answer = req.signal.aborted ? undefined : unwrittenStatusResponse(contentType, thrown);
      if (answer === undefined) throw thrown;
      return answer;
    });
    // The caller is gone: nobody reads the answer, so it is not completed.
    if (req.signal.aborted) return res;
    // Copied: Connect answers some requests with shared response objects (415) that must not change.
    const header = new Headers(res.header);
    header.set("x-request-id", requestId);
    // No answer is compressed (compressMinBytes, connect-adapter.ts), so none names a compression: connect-node names
    // the one it negotiated whatever it then does with each message, and the direct gRPC adapter names none.
    header.delete("grpc-encoding");
    header.delete("connect-content-encoding");
    const complete = (error: ConnectError): ConnectError => {
      if (error.findDetails(ErrorInfoSchema).length > 0) return error;
      const started = contextValues.get(callKey) !== undefined;
      const ours = refusalOf(error, !started, { domain, headers: req.header, maxMessageBytes: settings.maxMessageBytes, requestId });
      if (ours.internal) settings.logger.error({ requestId, method: handler.method.name, err: error }, "call failed outside its handler");
      return toConnectError(ours, null);
    };
    if (res.body === undefined) return { ...res, header };
    if (grpcWebContentTypeRegExp.test(contentType)) return completeGrpcWeb(res, res.body, header, complete, contextValues.get(callKey));
    if (grpcContentTypeRegExp.test(contentType)) {
      return res.trailer === undefined ? { ...res, header } : { ...res, header, body: completeGrpcTrailer(res.body, res.trailer, complete) };
    }
    if (contentTypeUnaryRegExp.test(contentType) && res.status !== 200 && !header.has("content-encoding")) {
      return completeConnectError(res.body, header, settings.jsonOptions, complete);
    }
    return { ...res, header };
  };
  // gRPC-web's text form is served as the binary form it encodes (grpc-web-text.ts).
  const wrapped = (req: UniversalServerRequest): Promise<UniversalServerResponse> => {
    const binary = binaryFromText(req, refuseNotBase64);
    return binary === null ? serve(req) : serve(binary).then(textFromBinary);
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

// The status entries of a failed call, replaced by the completed error's; the other entries (x-request-id ...)
// stay as they are. Returns the completed error, or undefined when the call did not fail (nothing was set).
function completeGrpcStatus(trailer: Headers, complete: (error: ConnectError) => ConnectError): ConnectError | undefined {
  const error = findTrailerError(trailer);
  if (error === undefined) return undefined;
  const completed = complete(error);
  grpcStatusHeaders(completed).forEach((value, key) => trailer.set(key, value));
  return completed;
}

// gRPC: the status is in the trailers, which Connect fills in as the body ends and the adapter writes after it.
async function* completeGrpcTrailer(
  body: AsyncIterable<Uint8Array>,
  trailer: Headers,
  complete: (error: ConnectError) => ConnectError,
): AsyncIterable<Uint8Array> {
  yield* body;
  completeGrpcStatus(trailer, complete);
}

// gRPC-web: the status is in the last frame of the body. A refusal, a trailer frame that comes first (before any
// message), gets the HTTP headers of a refusal besides (refusalHeaders), as a success gets the call's response
// headers as HTTP headers: Connect puts an error's metadata in the trailer frame alone. Connect has read the first
// frame before it answers (connect-node writes the headers after it), so waiting for it here holds nothing up.
async function completeGrpcWeb(
  res: UniversalServerResponse,
  body: AsyncIterable<Uint8Array>,
  header: Headers,
  complete: (error: ConnectError) => ConnectError,
  call: Call | undefined,
): Promise<UniversalServerResponse> {
  let headersSent = false;
  // A refusal whose trailer frame is the first frame (nothing was sent before it) has its metadata moved to the HTTP
  // headers, where fetch and HTTP tooling look: each entry once, as a native gRPC trailers-only answer has it in
  // its one block. Repeated in the trailer frame, connect-web merged both into the error's metadata and read
  // "3, 3" for X-RateLimit-Limit and "<id>, <id>" for x-request-id (a probe, 2026-11-28).
  const refused = (error: ConnectError, trailer: Headers): void => {
    if (headersSent) return;
    refusalHeaders(header, error, call?.responseHeaders ?? null);
    for (const name of [...trailer.keys()]) if (!name.startsWith("grpc-") && header.has(name)) trailer.delete(name);
  };
  const frames = completeGrpcWebTrailer(body, complete, refused)[Symbol.asyncIterator]();
  const first = frames.next();
  // Settled before the headers are decided; a failure of the body stays the body's, as it was.
  await first.then(
    () => undefined,
    () => undefined,
  );
  headersSent = true;
  return { ...res, header, body: replayed(first, frames) };
}

// `rest` with the result of its first next() given back first; closing it closes `rest`, so that Connect's cleanup
// still runs when the caller has gone (connect-adapter.ts).
function replayed(first: Promise<IteratorResult<Uint8Array>>, rest: AsyncIterator<Uint8Array>): AsyncIterable<Uint8Array> {
  let pending: Promise<IteratorResult<Uint8Array>> | null = first;
  const iterator: AsyncIterator<Uint8Array> = {
    next: () => {
      const result = pending ?? rest.next();
      pending = null;
      return result;
    },
    return: (value?: unknown) => rest.return?.(value) ?? Promise.resolve({ done: true, value: undefined }),
  };
  return { [Symbol.asyncIterator]: () => iterator };
}

// The HTTP headers of a refusal on Connect and gRPC-web, the protocols served here that travel over plain HTTP:
// Retry-After from its RetryInfo (RESOURCE_EXHAUSTED, UNAVAILABLE), as REST and the XML surface send it
// (retryAfterSeconds, CONTRACT section 4), and the call's response headers (X-RateLimit-* ...), which a Connect
// error already carries as its metadata. Native gRPC keeps its status and the call's headers in its trailers.
function refusalHeaders(header: Headers, error: ConnectError, callHeaders: readonly [string, string][] | null): void {
  if (callHeaders !== null) {
    // x-request-id is there already.
    const present = new Set(header.keys());
    for (const [name, value] of callHeaders) if (!present.has(name)) header.append(name, value);
  }
  const retryAfter = retryAfterSeconds(error);
  if (retryAfter !== undefined && !header.has("retry-after")) header.set("retry-after", String(retryAfter));
}

// Connect yields each gRPC-web frame as one chunk.
async function* completeGrpcWebTrailer(
  body: AsyncIterable<Uint8Array>,
  complete: (error: ConnectError) => ConnectError,
  refused: (error: ConnectError, trailer: Headers) => void,
): AsyncIterable<Uint8Array> {
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
    const error = completeGrpcStatus(trailer, complete);
    // A successful call's trailer frame goes out as Connect wrote it.
    if (error === undefined) {
      yield chunk;
      continue;
    }
    refused(error, trailer);
    yield encodeEnvelope(trailerFlag, trailerSerialize(trailer));
  }
}

// Connect unary: an error is the JSON body of a non-200 response.
async function completeConnectError(
  body: AsyncIterable<Uint8Array>,
  header: Headers,
  jsonOptions: Partial<JsonWriteOptions>,
  complete: (error: ConnectError) => ConnectError,
): Promise<UniversalServerResponse> {
  const bytes = await readAllBytes(body, Number.MAX_SAFE_INTEGER);
  // Connect's own error JSON, always; read back without a fallback it could silently fall into.
  const error = complete(errorFromJsonBytes(bytes, undefined, new ConnectError("not a Connect error body", Code.Internal)));
  // The call's response headers came as the error's metadata.
  refusalHeaders(header, error, null);
  const json = errorToJsonBytes(error, jsonOptions);
  header.set("content-length", String(json.byteLength));
  // Completing may change the code; the HTTP status follows the code the body now says.
  return { status: codeToHttpStatus(error.code), header, body: createAsyncIterable([json]) };
}
