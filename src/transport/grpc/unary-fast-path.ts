import http2 from "node:http2";
import { fromBinary } from "@bufbuild/protobuf";
import type { DescMessage, DescMethodUnary, MessageShape } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import type { Logger } from "pino";
import { DomainError, invalidArgument } from "../../errors/domain-error.js";
import { failure, logSuccess, requestIdOf } from "../call-outcome.js";

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

// gRPC unary calls of the hottest methods (Encrypt, Decrypt), served straight on the HTTP/2 stream. Connect's
// general handler costs several times the AES-GCM work per call (async iterables, abort signals, header
// conversions), which the benchmark against plain grpc-js and a bare http2 handler made plain. This path keeps
// what the caller can observe identical: the same handler functions, the same error mapping and grpc-status
// trailers (Connect's own setTrailerStatus), the same request ids and logs. Anything it does not handle itself
// (another method, content type, compression) is left to Connect.
export class UnaryFastPath {
  private readonly byPath = new Map<string, FastUnaryMethod>();

  constructor(
    methods: FastUnaryMethod[],
    private readonly logger: Logger,
    private readonly maxMessageBytes: number,
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

    const requestId = requestIdOf(headers["x-request-id"] as string | undefined);
    const started = performance.now();
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    stream.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > this.maxMessageBytes + ENVELOPE_BYTES) tooLarge = true;
      else chunks.push(chunk);
    });
    stream.once("end", () => {
      if (tooLarge) {
        const error = new DomainError({
          code: "resource_exhausted",
          reason: "REQUEST_TOO_LARGE",
          domain: "cloudplane",
          message: `request message is larger than ${this.maxMessageBytes} bytes`,
          violations: [{ subject: "request", description: `at most ${this.maxMessageBytes} bytes per message` }],
        });
        this.fail(stream, failure(this.logger, error, requestId, entry.method.name, started));
        return;
      }
      this.run(entry, stream, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks), requestId, started);
    });
    // A client that resets the stream leaves nothing to answer.
    stream.on("error", () => stream.destroy());
    return true;
  }

  private run(entry: FastUnaryMethod, stream: http2.ServerHttp2Stream, body: Buffer, requestId: string, started: number): void {
    const name = entry.method.name;
    let request;
    try {
      request = fromBinary(entry.method.input, unaryPayload(body));
    } catch {
      const error = invalidArgument(
        "cloudplane",
        [{ field: "", description: "the request is not one uncompressed protobuf message in a gRPC envelope" }],
        "MALFORMED_BODY",
      );
      this.fail(stream, failure(this.logger, error, requestId, name, started));
      return;
    }
    let result;
    try {
      result = entry.handle(request);
    } catch (thrown) {
      this.fail(stream, failure(this.logger, thrown, requestId, name, started));
      return;
    }
    if (result instanceof Promise) {
      result.then(
        (r) => this.succeed(entry, stream, r, requestId, started),
        (thrown: unknown) => this.fail(stream, failure(this.logger, thrown, requestId, name, started)),
      );
    } else {
      this.succeed(entry, stream, result, requestId, started);
    }
  }

  private succeed(entry: FastUnaryMethod, stream: http2.ServerHttp2Stream, frame: Buffer, requestId: string, started: number): void {
    if (stream.destroyed) return;
    stream.respond(
      // A new value on every response: never indexed, so it does not churn HPACK's table of reusable headers.
      { ":status": 200, "content-type": "application/grpc", "x-request-id": requestId, [http2.sensitiveHeaders]: ["x-request-id"] },
      { waitForTrailers: true },
    );
    stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    stream.end(frame);
    logSuccess(this.logger, requestId, entry.method.name, started);
  }

  // A trailers-only response, as gRPC servers send for errors.
  private fail(stream: http2.ServerHttp2Stream, error: ConnectError): void {
    if (stream.destroyed) return;
    const trailer = setTrailerStatus(new Headers(), error);
    const headers: http2.OutgoingHttpHeaders = { ":status": 200, "content-type": "application/grpc" };
    trailer.forEach((value, key) => (headers[key] = value));
    error.metadata.forEach((value, key) => (headers[key] = value));
    stream.respond(headers, { endStream: true });
  }
}

// The one message of a unary request, or an error when the body is not exactly one uncompressed envelope.
function unaryPayload(body: Buffer): Uint8Array {
  if (body.length < ENVELOPE_BYTES || body[0] !== 0 || body.readUInt32BE(1) !== body.length - ENVELOPE_BYTES) {
    throw new Error("malformed envelope");
  }
  return body.subarray(ENVELOPE_BYTES);
}
