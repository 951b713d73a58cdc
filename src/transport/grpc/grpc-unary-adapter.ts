import http2 from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import { invalidTimeout, malformedBody, notOneMessage, overLimits, requestTooLarge } from "../../errors/protocol-errors.js";
import { serverBusy } from "../limits/body-budget.js";
import type { BodyBudget } from "../limits/body-budget.js";
import { MAX_POOLED_BYTES, capacityFor } from "./body-pool.js";
import type { BodyPool } from "./body-pool.js";
import { statusPartsOf } from "../../errors/status-details.js";
import { toConnectError } from "../../errors/to-connect-error.js";
import { Call, requestIdOf } from "../../pipeline/call.js";
import { CallError, callErrorOf } from "../../pipeline/call-error.js";
import type { MethodEntry, MethodTable } from "../../pipeline/method-table.js";
import { parseTimeout } from "../../pipeline/stages/deadline.js";
import { NodeHeaders } from "../header-source.js";
import type { ViolationList } from "../../errors/violation-list.js";
import { WIRE_SLICE_BYTES, countWire, countWireInTurns } from "../limits/wire-count.js";
import { canRespond, respondIfPresent, stopReading } from "../peer-gone.js";
import { grpcStatusHeaders } from "./grpc-status.js";

// Writes a method's response as a whole gRPC frame (the 5-byte envelope and the message), in one buffer or as a
// head and a large payload written after it as they are. A method may have its own (Encrypt and Decrypt write their
// payload once, straight into the frame or after its head); every other method uses `encodeFrame`.
export type ResponseEncoder = (response: unknown) => Buffer | FrameParts;

// A frame of a large payload: written head first, then the payload, with nothing between them.
export type FrameParts = readonly [head: Buffer, payload: Uint8Array];

const ENVELOPE_BYTES = 5;

// A frozen response message (GetCryptoKey's, shared by its calls until the key changes) cannot change: its frame
// is encoded once, and written as it is by every call that answers with it.
const frozenFrames = new WeakMap<object, Buffer>();

function encodeFrame(entry: MethodEntry, response: unknown): Buffer {
  if (typeof response !== "object" || response === null || !Object.isFrozen(response)) return encodeMessage(entry, response);
  let frame = frozenFrames.get(response);
  if (frame === undefined) {
    frame = encodeMessage(entry, response);
    frozenFrames.set(response, frame);
  }
  return frame;
}

function encodeMessage(entry: MethodEntry, response: unknown): Buffer {
  const output = entry.method.output;
  const message = toBinary(output, create(output, response as never));
  const frame = Buffer.allocUnsafe(ENVELOPE_BYTES + message.length);
  frame[0] = 0;
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, ENVELOPE_BYTES);
  return frame;
}

// What one call needs between its events. It lives on the stream itself, so that the stream's listeners can be
// the shared functions below: a closure per listener per call cost about a tenth of a 1 KiB call.
const CALL = Symbol("cloudplane.grpcUnaryCall");

interface PendingCall {
  readonly adapter: GrpcUnaryAdapter;
  readonly entry: MethodEntry;
  readonly headers: http2.IncomingHttpHeaders;
  // The body: almost always one chunk (`first`). A body of more is kept as chunks (`rest`) until half of what its
  // envelope declares has come, then copied as they come into a buffer of the pool (`joined`, `declared` bytes long
  // when whole); one longer than its envelope declares (a second message) stays as chunks, joined at the end.
  first: Buffer | null;
  rest: Buffer[] | null;
  joined: Buffer | null;
  declared: number;
  size: number;
  tooLarge: boolean;
  // Refused for the server's budget of request bodies; and the bytes of this body the budget holds.
  busy: boolean;
  held: number;
  // performance.now() when the stream arrived: the caller's deadline counts from there, as Connect's does, not from
  // the end of the body (a body sent 1.5 s late under a 1 s deadline ran its handler for a second more).
  readonly arrived: number;
}

type PendingStream = http2.ServerHttp2Stream & { [CALL]: PendingCall };

// Constant, as Node only reads it: the request id is new on every response, so it is sent never-indexed and
// does not churn HPACK's table of reusable headers.
const SENSITIVE_HEADERS = ["x-request-id"];

// Over the limit by its size so far, or by the length its envelope declares (known from the first chunk, which
// almost always holds the 5-byte prefix): a 4 GiB declaration is refused before 4 MiB of it is read.
function isTooLarge(call: PendingCall, chunk: Buffer): boolean {
  const max = call.adapter.maxMessageBytes;
  if (call.size > max + ENVELOPE_BYTES) return true;
  return isFirst(call, chunk) && chunk.length >= ENVELOPE_BYTES && chunk.readUInt32BE(1) > max;
}

// The chunk just counted in `call.size` is the body's first (`call.first` is let go once a body is joined).
function isFirst(call: PendingCall, chunk: Buffer): boolean {
  return call.size === chunk.length;
}

function onData(this: PendingStream, chunk: Buffer): void {
  const call = this[CALL];
  call.size += chunk.length;
  if (isTooLarge(call, chunk)) {
    // Answered at once rather than at the end of a body that may never end; what was read is let go.
    call.tooLarge = true;
    dropBody(this, call);
  } else if (isFirst(call, chunk)) call.first = chunk;
  else if (!keepChunk(this, call, chunk)) {
    call.busy = true;
    dropBody(this, call);
  }
}

// A chunk after the first, or false when the server's budget of request bodies has no room for it.
function keepChunk(stream: PendingStream, call: PendingCall, chunk: Buffer): boolean {
  const joined = call.joined;
  if (joined !== null && call.size <= call.declared) {
    // Copied, so that the socket read it is a view of can go (body-pool.ts says why that matters).
    chunk.copy(joined, call.size - chunk.length);
    return true;
  }
  if (joined !== null) {
    // Longer than its envelope declares: kept as chunks from here on, what came before copied out of the pool's
    // buffer, which goes back.
    call.rest = [Buffer.from(joined.subarray(0, call.size - chunk.length))];
    giveBack(call);
  } else if (call.rest === null) {
    call.rest = [call.first!];
    call.first = null;
  }
  if (!holdUpTo(stream, call, call.size)) return false;
  call.rest.push(chunk);
  join(stream, call);
  return true;
}

// Into a buffer of the pool, once half of what the envelope declares has come: a body then holds at most three
// times what its caller sent (twice, in a buffer up to 1.5 times that), and the budget counts all of it. A body
// larger than the pool's buffers, or one whose envelope is split over its first chunks, stays in chunks.
function join(stream: PendingStream, call: PendingCall): void {
  const chunks = call.rest!;
  const head = chunks[0]!;
  if (head.length < ENVELOPE_BYTES) return;
  const declared = ENVELOPE_BYTES + head.readUInt32BE(1);
  if (call.size > declared || declared > 2 * call.size || declared > MAX_POOLED_BYTES) return;
  if (!holdUpTo(stream, call, capacityFor(declared))) return;
  const joined = call.adapter.bodyPool.take(declared);
  let at = 0;
  for (const c of chunks) at += c.copy(joined, at);
  call.joined = joined;
  call.declared = declared;
  call.rest = null;
}

// The pool's buffer of a joined body goes back, once nothing reads the request (or, for a refused one, ever will).
function giveBack(call: PendingCall): void {
  if (call.joined === null) return;
  call.adapter.bodyPool.give(call.joined);
  call.joined = null;
}

function dropBody(stream: PendingStream, call: PendingCall): void {
  call.first = null;
  call.rest = null;
  giveBack(call);
  stream.off("data", onData);
  stream.off("end", onEnd);
  call.adapter.finish(stream, call);
}

// A body of more than one chunk counts against the server's budget (body-budget.ts) from its second chunk until its
// call is answered (by a handler that is done with it, or by a refusal) or its stream closes, by the bytes it holds
// (its chunks, or the pool's buffer it is joined in); one of a single chunk (a 1 KiB call: nearly every one) is read
// and run in the same turn, and adds neither the count nor a listener to the hot path. Counted until the stream
// closed (until 2026-11-28), answers a client never let out (its window held at 0) kept the whole budget counted
// for as long as it kept its session, and every large body of everyone else was refused (a probe).
function holdUpTo(stream: PendingStream, call: PendingCall, bytes: number): boolean {
  if (bytes <= call.held) return true;
  const budget = call.adapter.bodyBudget;
  if (!budget.take(bytes - call.held)) return false;
  if (call.held === 0) stream.once("close", () => release(call));
  call.held = bytes;
  return true;
}

function release(call: PendingCall): void {
  if (call.held === 0) return;
  call.adapter.bodyBudget.give(call.held);
  call.held = 0;
}

function onEnd(this: PendingStream): void {
  this[CALL].adapter.finish(this, this[CALL]);
}

// A client that resets the stream leaves nothing to answer.
function onError(this: PendingStream): void {
  this.destroy();
}

function onWantTrailers(this: PendingStream): void {
  // Node asks for the trailers from its socket loop: the stream can be gone by then.
  if (!this.destroyed && !this.closed) this.sendTrailers({ "grpc-status": "0" });
}

// gRPC unary calls of every method the pipeline has a handler for, served straight on the HTTP/2 stream: the
// envelope, the count of its elements (src/transport/limits/), fromBinary, the pipeline, and toBinary (or the method's own encoder). Connect's general handler costs
// several times the work of most calls (async iterables, abort signals, header conversions), as the benchmark
// against plain grpc-js and a bare http2 handler showed. What a caller sees is the same as from Connect, which
// CI checks by running the same tests both ways (CALL_PATH=connect). Anything else (streams, gRPC-web, Connect,
// compressed messages) is left to Connect.
export class GrpcUnaryAdapter {
  constructor(
    private readonly table: MethodTable,
    private readonly encoders: ReadonlyMap<MethodEntry, ResponseEncoder>,
    private readonly logger: Logger,
    readonly maxMessageBytes: number,
    readonly bodyBudget: BodyBudget,
    readonly bodyPool: BodyPool,
  ) {}

  // Returns false, touching nothing, when the stream is not one of ours.
  tryServe(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): boolean {
    const path = headers[":path"];
    const entry = path === undefined ? undefined : this.table.byPath(path);
    if (entry?.invoke == null || headers[":method"] !== "POST") return false;
    const contentType = headers["content-type"];
    if (contentType !== "application/grpc" && contentType !== "application/grpc+proto") return false;
    const encoding = headers["grpc-encoding"];
    if (encoding !== undefined && encoding !== "identity") return false;

    const call: PendingCall = { adapter: this, entry, headers, first: null, rest: null, joined: null, declared: 0, size: 0, tooLarge: false, busy: false, held: 0, arrived: performance.now() };
    // First: every stream this adapter takes is one nobody else listens to, and Node ends the process on an 'error'
    // nobody hears. A stream refused below had none: its peer, holding the window at 0 so that the refusal's end
    // never went out, then reset it with INTERNAL_ERROR, and the server exited (a probe, 2026-11-28).
    stream.on("error", onError);
    // Refused before the body is read, as Connect refuses it (connect-refusals.ts); the unread body is then
    // reset after the status. The deadline stage reads the valid ones.
    const given = headers["grpc-timeout"];
    const timeout = Array.isArray(given) ? given[0] : given;
    if (timeout !== undefined && parseTimeout("grpc-timeout", timeout) === undefined) {
      this.refuse(stream, call, new CallError(statusPartsOf(invalidTimeout(entry.policy.domain, "grpc-timeout")), false));
      return true;
    }
    (stream as PendingStream)[CALL] = call;
    stream.on("data", onData);
    stream.on("end", onEnd);
    return true;
  }

  // The request is complete: answer it.
  finish(stream: http2.ServerHttp2Stream, pending: PendingCall): void {
    // A stream the peer reset also ends its readable side: nobody is left to answer, and building the error
    // for its cut-off body cost more than the rest of the call (rapid reset made that a flood).
    if (!canRespond(stream)) {
      giveBack(pending);
      return;
    }
    const { entry } = pending;
    const domain = entry.policy.domain;
    if (pending.tooLarge) {
      this.refuse(stream, pending, new CallError(statusPartsOf(requestTooLarge(domain, this.maxMessageBytes)), false));
      return;
    }
    if (pending.busy) {
      this.refuse(stream, pending, new CallError(statusPartsOf(serverBusy(domain, this.bodyBudget.maxBytes)), false));
      return;
    }
    const body =
      pending.joined !== null
        ? pending.joined.subarray(0, pending.size)
        : pending.rest !== null
          ? Buffer.concat(pending.rest, pending.size)
          : (pending.first ?? Buffer.alloc(0));
    pending.first = null;
    pending.rest = null;
    const payload = unaryPayload(body, this.maxMessageBytes);
    if (typeof payload === "string") giveBack(pending);
    if (payload === "too large") {
      this.refuse(stream, pending, new CallError(statusPartsOf(requestTooLarge(domain, this.maxMessageBytes)), false));
      return;
    }
    if (payload === "not one message") {
      this.refuse(stream, pending, new CallError(statusPartsOf(notOneMessage(domain)), false));
      return;
    }
    if (payload === "malformed") {
      this.refuse(stream, pending, new CallError(statusPartsOf(malformedBody(domain, "grpc")), false));
      return;
    }
    // Counted before decoding: a message of a million elements costs a scan of its bytes, not a million strings;
    // a large one is counted a slice a turn, so that it does not hold up the other connections.
    if (payload.length <= WIRE_SLICE_BYTES) {
      this.decode(stream, pending, payload, countWire(entry.limits, payload));
      return;
    }
    countWireInTurns(entry.limits, payload).then(
      (over) => this.decode(stream, pending, payload, over),
      (err: unknown) => {
        this.logger.error({ err }, "counting a request failed");
        giveBack(pending);
        stream.destroy();
      },
    );
  }

  // Decodes a counted request and runs its call.
  private decode(stream: http2.ServerHttp2Stream, pending: PendingCall, payload: Uint8Array, over: ViolationList | null): void {
    // The peer may have left while a large request was counted.
    if (!canRespond(stream)) {
      giveBack(pending);
      return;
    }
    const { entry } = pending;
    const domain = entry.policy.domain;
    if (over !== null) {
      giveBack(pending);
      this.refuse(stream, pending, new CallError(statusPartsOf(overLimits(domain, over)), false));
      return;
    }
    let request;
    try {
      request = fromBinary(entry.method.input, payload);
    } catch {
      giveBack(pending);
      this.refuse(stream, pending, new CallError(statusPartsOf(malformedBody(domain, "grpc")), false));
      return;
    }
    const call = new Call(entry, "grpc", request, new NodeHeaders(pending.headers), null, stream, stream.session?.socket ?? null, null, pending.arrived);
    let outcome;
    try {
      outcome = entry.invoke!(call);
    } catch (thrown) {
      this.fail(stream, call, thrown);
      this.done(pending, call, null);
      return;
    }
    if (outcome instanceof Promise) {
      outcome.then(
        (response: unknown) => {
          this.done(pending, call, this.succeed(stream, call, response));
        },
        (thrown: unknown) => {
          this.fail(stream, call, thrown);
          this.done(pending, call, null);
        },
      );
    } else {
      this.done(pending, call, this.succeed(stream, call, outcome));
    }
  }

  // A joined body's buffer goes back to the pool once its call is answered, if the handler returned: its request
  // (whose bytes fields are views of the buffer) is then read by nobody, and the answer is encoded. The buffer of a
  // handler still running (a call its deadline answered) or one that threw (what it threw may hold a view of the
  // request) is left to the garbage collector; so is one that the answer's payload, still being sent, is a view of
  // (`written`).
  private done(pending: PendingCall, call: Call, written: Uint8Array | null): void {
    // A handler its deadline cut short may still read the request: its bytes stay counted until the stream closes.
    if (!call.abandoned) release(pending);
    if (pending.joined === null) return;
    if (call.handlerReturned && written?.buffer !== pending.joined.buffer) giveBack(pending);
    else pending.joined = null;
  }

  // Returns the payload of a frame written in parts (as it is, so still read until sent), else null.
  private succeed(stream: http2.ServerHttp2Stream, call: Call, response: unknown): Uint8Array | null {
    const encode = this.encoders.get(call.entry);
    let frame: Buffer | FrameParts;
    try {
      frame = encode === undefined ? encodeFrame(call.entry, response) : encode(response);
    } catch (thrown) {
      this.fail(stream, call, thrown);
      return null;
    }
    const headers: http2.OutgoingHttpHeaders = { ":status": 200, "content-type": "application/grpc+proto", [http2.sensitiveHeaders]: SENSITIVE_HEADERS };
    if (call.responseHeaders !== null) for (const [name, value] of call.responseHeaders) headers[name] = value;
    if (!respondIfPresent(stream, headers, { waitForTrailers: true })) return null;
    stream.on("wantTrailers", onWantTrailers);
    if (Array.isArray(frame)) {
      // Corked, so that both parts go down in one write (end uncorks).
      stream.cork();
      stream.write(frame[0]);
      stream.end(frame[1]);
      return frame[1];
    }
    stream.end(frame);
    return null;
  }

  private fail(stream: http2.ServerHttp2Stream, call: Call, thrown: unknown): void {
    // Thrown past the stages (a fault of a stage itself, or a server run without stages): mapped here.
    const error = thrown instanceof CallError ? thrown : callErrorOf(thrown, call.entry.policy.domain, call.requestId);
    if (error !== thrown && error.internal) this.logger.error({ requestId: call.requestId, err: thrown }, "call failed outside the pipeline's error stage");
    // As Connect answers a failed call: the request id in the headers, the headers the stages added (x-ratelimit-*
    // of a rate-limit refusal) in the trailers with the status. They went in both, which Connect's path did not do.
    this.respondWithError(stream, error, [["x-request-id", call.requestId]], call.responseHeaders);
  }

  // Refused before the pipeline: the request is not a message of the method.
  private refuse(stream: http2.ServerHttp2Stream, pending: PendingCall, error: CallError): void {
    release(pending);
    // Connect, refusing such a request before any handler runs, sends the request id with the headers only.
    const requestId = requestIdOf(pending.headers["x-request-id"] as string | undefined);
    this.respondWithError(stream, error, [["x-request-id", requestId]], null);
  }

  // Headers, then the status in trailers, as Connect answers (so that both paths look the same on the wire). A
  // request still being sent (too large) is then reset, so that the client stops sending.
  private respondWithError(
    stream: http2.ServerHttp2Stream,
    error: CallError,
    responseHeaders: readonly [string, string][] | null,
    responseTrailers: readonly [string, string][] | null,
  ): void {
    const headers: http2.OutgoingHttpHeaders = { ":status": 200, "content-type": "application/grpc+proto" };
    if (responseHeaders !== null) for (const [name, value] of responseHeaders) headers[name] = value;
    if (!respondIfPresent(stream, headers, { waitForTrailers: true })) return;
    const trailers: http2.OutgoingHttpHeaders = {};
    if (responseTrailers !== null) for (const [name, value] of responseTrailers) trailers[name] = value;
    grpcStatusHeaders(toConnectError(error, null)).forEach((value, key) => (trailers[key] = value));
    (stream as ErrorStream)[TRAILERS] = trailers;
    stream.on("wantTrailers", onWantErrorTrailers);
    stream.end();
  }
}

const TRAILERS = Symbol("cloudplane.grpcErrorTrailers");
type ErrorStream = http2.ServerHttp2Stream & { [TRAILERS]: http2.OutgoingHttpHeaders };

function onWantErrorTrailers(this: ErrorStream): void {
  if (this.destroyed || this.closed) return;
  this.sendTrailers(this[TRAILERS]);
  // One turn later, so that the reset follows the trailers on the wire instead of discarding them.
  if (!this.readableEnded) setImmediate(stopReading, this);
}

// The one message of a unary request. Told apart as Connect and the body it reads tell them apart
// (connect-refusals.ts, counted-body.ts), so that both paths answer alike: no message or a second whole one; an
// envelope cut short or flagged compressed; a second envelope whose header declares more than the limit (Connect
// refuses it on that header) or whose flags are not 0 or 1 (the counted body refuses those).
function unaryPayload(body: Buffer, maxBytes: number): Uint8Array | "not one message" | "malformed" | "too large" {
  if (body.length === 0) return "not one message";
  if (body.length < ENVELOPE_BYTES) return "malformed";
  // As when the envelope came whole in the first chunk (isTooLarge) and as Connect answers: a declared length past
  // the limit is too large, however little of the message followed.
  if (body.readUInt32BE(1) > maxBytes) return "too large";
  const end = ENVELOPE_BYTES + body.readUInt32BE(1);
  if (end > body.length || body[0] !== 0) return "malformed";
  if (end === body.length) return body.subarray(ENVELOPE_BYTES, end);
  const extra = body.length - end;
  if (extra < ENVELOPE_BYTES) return "malformed";
  const declared = body.readUInt32BE(end + 1);
  if (declared > maxBytes) return "too large";
  if ((body[end]! & ~1) !== 0) return "malformed";
  return declared <= extra - ENVELOPE_BYTES ? "not one message" : "malformed";
}
