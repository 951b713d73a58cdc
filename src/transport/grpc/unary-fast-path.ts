import http2 from "node:http2";
import { fromBinary } from "@bufbuild/protobuf";
import type { DescMessage, DescMethodUnary, MessageShape } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import type { Logger } from "pino";
import { DomainError, invalidArgument } from "../../errors/domain-error.js";
import { failure, logSuccess, requestIdOf } from "../call-outcome.js";
import { canRespond, respondIfPresent, stopReading } from "../peer-gone.js";
import { grpcStatusHeaders } from "./grpc-status.js";

// A method served on the fast path. `handle` returns the response already serialized in its gRPC envelope, so
// the method can write its message straight into the one buffer that goes on the wire.
export interface FastUnaryMethod<I extends DescMessage = DescMessage> {
  method: DescMethodUnary<I, DescMessage>;
  handle(request: MessageShape<I>): Buffer | Promise<Buffer>;
}

// Declares one method for the fast path with its request type checked against the handler.
export function fastUnary<I extends DescMessage>(
  method: DescMethodUnary<I, DescMessage>,
  handle: (request: MessageShape<I>) => Buffer | Promise<Buffer>,
): FastUnaryMethod {
  return { method, handle } as unknown as FastUnaryMethod;
}

const ENVELOPE_BYTES = 5;

// What one call needs between its events. It lives on the stream itself, so that the stream's listeners can be
// the shared functions below: a closure per listener per call cost about a tenth of a 1 KiB call.
const CALL = Symbol("cloudplane.fastUnaryCall");

interface FastCall {
  readonly server: UnaryFastPath;
  readonly entry: FastUnaryMethod;
  readonly requestId: string;
  readonly started: number;
  // The body: almost always one chunk, so the array exists only when a second one comes.
  first: Buffer | null;
  rest: Buffer[] | null;
  size: number;
  tooLarge: boolean;
}

type FastStream = http2.ServerHttp2Stream & { [CALL]: FastCall };

// Constant, as Node only reads it: the request id is new on every response, so it is sent never-indexed and
// does not churn HPACK's table of reusable headers.
const SENSITIVE_HEADERS = ["x-request-id"];

// Over the limit by its size so far, or by the length its envelope declares (known from the first chunk, which
// almost always holds the 5-byte prefix): a 4 GiB declaration is refused before 4 MiB of it is read.
function isTooLarge(call: FastCall, chunk: Buffer): boolean {
  const max = call.server.maxMessageBytes;
  if (call.size > max + ENVELOPE_BYTES) return true;
  return call.first === null && chunk.length >= ENVELOPE_BYTES && chunk.readUInt32BE(1) > max;
}

function onData(this: FastStream, chunk: Buffer): void {
  const call = this[CALL];
  call.size += chunk.length;
  if (isTooLarge(call, chunk)) {
    // Answered at once rather than at the end of a body that may never end; what was read is let go.
    call.tooLarge = true;
    call.first = null;
    call.rest = null;
    this.off("data", onData);
    this.off("end", onEnd);
    call.server.finish(this, call);
  } else if (call.first === null) call.first = chunk;
  else (call.rest ??= [call.first]).push(chunk);
}

function onEnd(this: FastStream): void {
  this[CALL].server.finish(this, this[CALL]);
}

// A client that resets the stream leaves nothing to answer.
function onError(this: FastStream): void {
  this.destroy();
}

function onWantTrailers(this: FastStream): void {
  // Node asks for the trailers from its socket loop: the stream can be gone by then.
  if (!this.destroyed && !this.closed) this.sendTrailers({ "grpc-status": "0" });
}

// gRPC unary calls of the hottest methods (Encrypt, Decrypt), served straight on the HTTP/2 stream. Connect's
// general handler costs several times the AES-GCM work per call (async iterables, abort signals, header
// conversions), which the benchmark against plain grpc-js and a bare http2 handler made plain. This path keeps
// what the caller can observe identical: the same handler functions, the same error mapping and grpc-status
// trailers (grpc-status.ts, as for Connect-served calls), the same request ids and logs. Anything it does not handle itself
// (another method, content type, compression) is left to Connect.
export class UnaryFastPath {
  private readonly byPath = new Map<string, FastUnaryMethod>();

  constructor(
    methods: FastUnaryMethod[],
    private readonly logger: Logger,
    readonly maxMessageBytes: number,
  ) {
    for (const m of methods) this.byPath.set(`/${m.method.parent.typeName}/${m.method.name}`, m);
  }

  // Returns false, touching nothing, when the stream is not one of ours.
  tryServe(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): boolean {
    const path = headers[":path"];
    const entry = path === undefined ? undefined : this.byPath.get(path);
    if (entry === undefined || headers[":method"] !== "POST") return false;
    const contentType = headers["content-type"];
    if (contentType !== "application/grpc" && contentType !== "application/grpc+proto") return false;
    const encoding = headers["grpc-encoding"];
    if (encoding !== undefined && encoding !== "identity") return false;

    const call: FastCall = {
      server: this,
      entry,
      requestId: requestIdOf(headers["x-request-id"] as string | undefined),
      started: performance.now(),
      first: null,
      rest: null,
      size: 0,
      tooLarge: false,
    };
    (stream as FastStream)[CALL] = call;
    stream.on("data", onData);
    stream.on("end", onEnd);
    stream.on("error", onError);
    return true;
  }

  // The request is complete: answer it.
  finish(stream: http2.ServerHttp2Stream, call: FastCall): void {
    // A stream the peer reset also ends its readable side: nobody is left to answer, and building the error
    // for its cut-off body cost more than the rest of the call (rapid reset made that a flood).
    if (!canRespond(stream)) return;
    const name = call.entry.method.name;
    if (call.tooLarge) {
      const error = new DomainError({
        code: "resource_exhausted",
        reason: "REQUEST_TOO_LARGE",
        domain: "cloudplane",
        message: `request message is larger than ${this.maxMessageBytes} bytes`,
        violations: [{ subject: "request", description: `at most ${this.maxMessageBytes} bytes per message` }],
      });
      this.fail(stream, failure(this.logger, error, call.requestId, name, call.started));
      return;
    }
    const body = call.rest !== null ? Buffer.concat(call.rest, call.size) : (call.first ?? Buffer.alloc(0));
    let request;
    try {
      request = fromBinary(call.entry.method.input, unaryPayload(body));
    } catch {
      const error = invalidArgument(
        "cloudplane",
        [{ field: "", description: "the request is not one uncompressed protobuf message in a gRPC envelope" }],
        "MALFORMED_BODY",
      );
      this.fail(stream, failure(this.logger, error, call.requestId, name, call.started));
      return;
    }
    let result;
    try {
      result = call.entry.handle(request);
    } catch (thrown) {
      this.fail(stream, failure(this.logger, thrown, call.requestId, name, call.started));
      return;
    }
    if (result instanceof Promise) {
      result.then(
        (frame) => this.succeed(stream, call, frame),
        (thrown: unknown) => this.fail(stream, failure(this.logger, thrown, call.requestId, name, call.started)),
      );
    } else {
      this.succeed(stream, call, result);
    }
  }

  private succeed(stream: http2.ServerHttp2Stream, call: FastCall, frame: Buffer): void {
    const headers = { ":status": 200, "content-type": "application/grpc", "x-request-id": call.requestId, [http2.sensitiveHeaders]: SENSITIVE_HEADERS };
    if (!respondIfPresent(stream, headers, { waitForTrailers: true })) return;
    stream.on("wantTrailers", onWantTrailers);
    stream.end(frame);
    logSuccess(this.logger, call.requestId, call.entry.method.name, call.started);
  }

  // A trailers-only response, as gRPC servers send for errors. A request still being sent (too large) is then
  // reset, so the client stops sending.
  private fail(stream: http2.ServerHttp2Stream, error: ConnectError): void {
    const headers: http2.OutgoingHttpHeaders = { ":status": 200, "content-type": "application/grpc" };
    error.metadata.forEach((value, key) => (headers[key] = value));
    grpcStatusHeaders(error).forEach((value, key) => (headers[key] = value));
    if (respondIfPresent(stream, headers, { endStream: true }) && !stream.readableEnded) stopReading(stream);
  }
}

// The one message of a unary request, or an error when the body is not exactly one uncompressed envelope.
function unaryPayload(body: Buffer): Uint8Array {
  if (body.length < ENVELOPE_BYTES || body[0] !== 0 || body.readUInt32BE(1) !== body.length - ENVELOPE_BYTES) {
    throw new Error("malformed envelope");
  }
  return body.subarray(ENVELOPE_BYTES);
}
