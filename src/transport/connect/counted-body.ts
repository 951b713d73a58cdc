import { ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import type { JsonValue } from "@bufbuild/protobuf";
import { invalidArgument } from "../../errors/domain-error.js";
import type { DomainError } from "../../errors/domain-error.js";
import { compressedRequestTooLarge, malformedBody, notOneMessage, requestTooLarge, unknownJsonField } from "../../errors/protocol-errors.js";
import { serverBusy } from "../limits/body-budget.js";
import type { BodyBudget } from "../limits/body-budget.js";
import type { BodyEncoding } from "../../errors/protocol-errors.js";
import type { ErrorDomain } from "../../errors/reasons.js";
import { statusPartsOf } from "../../errors/status-details.js";
import { toConnectError } from "../../errors/to-connect-error.js";
import { ViolationList } from "../../errors/violation-list.js";
import { CallError } from "../../pipeline/call-error.js";
import type { MessageLimits } from "../../pipeline/message-limits.js";
import { ExpansionRefused, acceptedCompressions } from "../compression.js";
import type { FairTurns } from "../fair-turns.js";
import { findMisread, holdsMisreadable } from "../json-misread.js";
import { UnknownJsonField, countJson } from "../limits/json-count.js";
import { describeExpected } from "../field-description.js";
import { WIRE_SLICE_BYTES, countWire, countWireInTurns } from "../limits/wire-count.js";
import { parseConnectContentType, parseGrpcContentType, parseGrpcWebContentType } from "./connect-internals.js";
import type { Compression, UniversalServerRequest } from "./connect-internals.js";

// connect-node decodes a request itself, in its protocol handlers, before any interceptor sees it; its options
// offer no hook between the bytes and fromBinary or JSON.parse. So the body it reads is this one: the request's
// own bytes, passed on unchanged, with each message counted (src/transport/limits/) as it completes and before
// it is passed on, so that Connect decodes only messages within their limits. A message over them ends the body
// with the refusal, which Connect answers as it answers any error of reading the request: before the pipeline for
// a unary call, as the gRPC adapter does; within the stream for a streaming one.
//
// Messages are framed as each protocol frames them: gRPC, gRPC-web and Connect streams in envelopes (flag byte,
// length, message), a Connect unary call as the whole body. A compressed message is decompressed (with the same
// compressions and size limit as Connect) to be counted. Whatever Connect will refuse on its own (an envelope or
// body over the size limit, an unknown compression, data that does not decompress) is passed on uncounted for
// Connect to refuse. gRPC-web's text form never comes here as text: the handler wrapper decodes it first
// (grpc-web-text.ts), and what it decodes is counted as the binary form is.

const ENVELOPE_BYTES = 5;
const FLAG_COMPRESSED = 0x01;

type Refuse = (violations: ViolationList) => ConnectError;

interface Framing {
  enveloped: boolean;
  binary: boolean;
  // What the body must be, for the refusal of an envelope whose flags are not a request's.
  encoding: BodyEncoding;
  // The compression the messages come in, null for none; undefined for one Connect will refuse.
  compression: Compression | null | undefined;
}

// `turns`: when the request's own body fails (its peer left), connect-node learns it in a turn with room for it
// (fair-turns.ts): a dropped connection ends all its calls at once, and each end costs about as much as a start.
export function countedRequest(
  req: UniversalServerRequest,
  limits: MessageLimits,
  maxBytes: number,
  refuse: Refuse,
  turns: FairTurns | null,
  unary: boolean,
  // The server's budget of request bodies, which the bytes read count against until the body has been read whole;
  // null when they were counted already (a REST call sent through Connect in-process).
  budget: BodyBudget | null,
): UniversalServerRequest {
  const body = req.body;
  if (req.method !== "POST" || typeof body !== "object" || body === null || !(Symbol.asyncIterator in body)) return req;
  const framing = framingOf(req.header);
  if (framing === null) return req;
  // connect-node allocates a unary body's declared Content-Length before reading a byte of it (readAllBytes), the
  // same amplification as an envelope's header (CountedBody): it is not told a length within the limit, and collects
  // the body as it arrives; one over the limit it refuses on the header alone, as before.
  if (!framing.enveloped && Number(req.header.get("content-length")) <= maxBytes) req.header.delete("content-length");
  // The called service's domain, read off the refusal `refuse` makes, for the refusals made here.
  const domain = (): ErrorDomain => (refuse(ViolationList.of([])).findDetails(ErrorInfoSchema)[0]?.domain ?? "cloudplane") as ErrorDomain;
  const ours = (error: DomainError): ConnectError => toConnectError(new CallError(statusPartsOf(error), false), null);
  // Undefined when counted at once (the usual case: no promise per call); a promise when the message had to be
  // decompressed or is large enough to be counted a slice a turn.
  const count = (flags: number, message: Uint8Array): Promise<void> | undefined => {
    if ((flags & FLAG_COMPRESSED) !== 0) {
      const compression = framing.compression;
      if (compression == null) return undefined;
      return compression.decompress(message, maxBytes).then(
        (bytes) => countAll(bytes),
        (reason: unknown) => {
          // Past what its compressed size allows (compression.ts): refused here, where the bound is known, since an
          // error connect-node writes reaches its caller as its message alone.
          const refused = reason instanceof ConnectError ? reason.cause : undefined;
          if (refused instanceof ExpansionRefused) throw ours(compressedRequestTooLarge(domain(), refused.compressedBytes, refused.allowedBytes));
          // Connect decompresses it again and refuses it itself.
          return undefined;
        },
      );
    }
    return countAll(message);
  };
  const countAll = (bytes: Uint8Array): Promise<void> | undefined => {
    if (framing.binary && bytes.length > WIRE_SLICE_BYTES) {
      return countWireInTurns(limits, bytes).then((over) => {
        if (over !== null) throw refuse(over);
      });
    }
    // An unknown member is refused as REST refuses it, naming it; Connect would refuse it too (ignoreUnknownFields is
    // off, src/server.ts), but only as a body it could not read.
    const over = framing.binary ? countWire(limits, bytes) : countJson(limits, bytes, { unknownFields: "refuse" });
    if (over instanceof UnknownJsonField) throw ours(unknownJsonField(domain(), over.path, over.name, over.typeName));
    if (over !== null) throw refuse(over);
    if (!framing.binary && holdsMisreadable(limits.desc)) refuseMisread(bytes);
    return undefined;
  };
  // A value protobuf-es would read as another one (json-misread.ts: a Timestamp that names no moment, an integer
  // string that is not decimal), refused as REST refuses it; a text that is not JSON is left to Connect.
  const refuseMisread = (bytes: Uint8Array): void => {
    let json: JsonValue;
    try {
      json = JSON.parse(new TextDecoder().decode(bytes)) as JsonValue;
    } catch {
      return;
    }
    const misread = findMisread(limits.desc, json, "");
    if (misread === undefined) return;
    const description = `invalid value; ${describeExpected(misread.field, misread.path.endsWith("]"))}`;
    throw ours(invalidArgument(domain(), [{ field: misread.path, description }]));
  };
  const source = { it: body[Symbol.asyncIterator](), turns };
  // A request envelope's flags are 0 or 1 (compressed): gRPC's Compressed-Flag, gRPC-web's (whose 0x80 marks the
  // trailer frame only a server sends) and Connect's (whose 0x02 ends a response stream). connect-node reads any
  // other flag as a message and served the call; the direct gRPC adapter refuses it. Refused here with the same
  // error, MALFORMED_BODY in the called service's domain, read off the refusal `refuse` makes (docs/callers.md).
  const refusals: Refusals = {
    malformed: () => ours(malformedBody(domain(), framing.encoding)),
    tooLarge: () => ours(requestTooLarge(domain(), maxBytes)),
    notOneMessage: () => ours(notOneMessage(domain())),
    busy: () => ours(serverBusy(domain(), budget?.maxBytes ?? 0)),
  };
  const counted = new CountedBody(source, maxBytes, count, refusals, framing.enveloped, framing.compression === null ? 0 : FLAG_COMPRESSED, unary, budget);
  // connect-node may stop reading a body without ending it or calling `return` (a server-streaming call sent a
  // second message: its bytes stayed counted for good, a probe found, and 68 such calls without credentials filled
  // the budget). Whatever is still counted goes back when the request closes.
  if (budget !== null) req.signal.addEventListener("abort", () => counted.giveBack(), { once: true });
  return { ...req, body: counted };
}

// How the protocol Connect will pick for this content type frames its messages; null when none will.
function framingOf(header: Headers): Framing | null {
  const contentType = header.get("content-type");
  const grpc = parseGrpcContentType(contentType);
  if (grpc !== undefined) {
    return { enveloped: true, binary: grpc.binary, encoding: grpc.binary ? "grpc" : "grpc-json", compression: compressionOf(header.get("grpc-encoding")) };
  }
  const grpcWeb = parseGrpcWebContentType(contentType);
  if (grpcWeb !== undefined) {
    if (grpcWeb.text) return null;
    return { enveloped: true, binary: grpcWeb.binary, encoding: grpcWeb.binary ? "grpc-web" : "grpc-web-json", compression: compressionOf(header.get("grpc-encoding")) };
  }
  const connect = parseConnectContentType(contentType);
  if (connect === undefined) return null;
  const compression = compressionOf(header.get(connect.stream ? "connect-content-encoding" : "content-encoding"));
  return { enveloped: connect.stream, binary: connect.binary, encoding: connect.binary ? "connect-proto" : "connect-json", compression };
}

function compressionOf(name: string | null): Compression | null | undefined {
  if (name === null || name === "identity") return null;
  return acceptedCompressions.find((c) => c.name === name);
}

type Count = (flags: number, message: Uint8Array) => Promise<void> | undefined;

// The refusals a body gets here, as the gRPC adapter gives them for the same bytes.
interface Refusals {
  // An envelope whose flags are neither 0 nor 1, or a unary body whose bytes after its message are no envelope.
  malformed(): ConnectError;
  tooLarge(): ConnectError;
  notOneMessage(): ConnectError;
  // The server's budget of request bodies has no room for more of this one.
  busy(): ConnectError;
}

interface Source {
  readonly it: AsyncIterator<Uint8Array>;
  readonly turns: FairTurns | null;
}

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

// The request's bytes as connect-node reads them, each message counted before the chunk that completes it is
// passed on: envelopes (gRPC, gRPC-web, Connect streams), or the whole body (Connect unary), counted at its end.
// An envelope is passed on only once it is whole: connect-node allocates the length an envelope's header declares
// as soon as it reads the header, so 1,000 headers declaring 4 MiB each, with nothing after them, made it hold 4 GB
// of buffers for bytes that never came, and V8 collected its heap over and over under that external memory (the
// server stalled 2.6 s; docs/robustness.md). Held here, an envelope takes what has arrived of it.
// An iterator written out rather than an async generator: a generator and its awaits cost about 5 µs a call,
// three times the count of a 1 KiB JSON body. When the request's own body fails (its peer left), the failure is
// passed on in a turn with room for it (fair-turns.ts): a dropped connection ends all its calls at once.
class CountedBody implements AsyncIterableIterator<Uint8Array> {
  readonly #header = new Uint8Array(ENVELOPE_BYTES);
  #headerFill = 0;
  #length = 0;
  // The bytes of the current envelope's message read so far.
  #fill = 0;
  // The chunks of the envelope in progress (header included), held back until it is whole.
  #held: Uint8Array[] = [];
  // Set once an envelope declares more than the size limit, which Connect refuses as soon as it reads the header:
  // from then on every byte is passed on as it comes.
  #passAll = false;
  // A unary body's one envelope, held back until the body ends (and counted then), and how many bytes followed it
  // (the first five of them, a second envelope's header, are read into #header); null and 0 until it is whole.
  #one: { flags: number; envelope: Uint8Array; message: Uint8Array } | null = null;
  #afterOne = 0;
  // The bytes of this body the server's budget holds for it.
  #budgeted = 0;
  // The whole body's chunks, while within the size limit.
  readonly #chunks: Uint8Array[] = [];
  #size = 0;

  constructor(
    private readonly source: Source,
    private readonly maxBytes: number,
    private readonly count: Count,
    private readonly refusals: Refusals,
    private readonly enveloped: boolean,
    // The flags of the whole body: compressed or not.
    private readonly wholeFlags: number,
    // A unary call: its body is one envelope, passed on once the body has ended, as the gRPC adapter reads it: bytes
    // after the envelope are refused first (`afterOneRefusal`, in that adapter's order), then the message is counted.
    // connect-node's answer to such bytes depended on where they were cut (test/property/grpc-chunks.test.ts).
    private readonly unary: boolean,
    private readonly budget: BodyBudget | null,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<Uint8Array>> {
    const reading = this.source.it.next().then(this.#read, this.#failed);
    return this.budget === null ? reading : reading.then(this.#giveBackAtEnd, this.#giveBackOnError);
  }

  // Connect stopped reading before the end: the request's own iterator is let go, as `for await` would.
  return(): Promise<IteratorResult<Uint8Array>> {
    this.giveBack();
    const it = this.source.it;
    return it.return === undefined ? Promise.resolve(DONE) : it.return().then(() => DONE);
  }

  // Counted against the server's budget from the chunk that brings them until the body has been read whole, has
  // failed, or was refused: a body still arriving is what a slow or stalled caller makes the server hold (the
  // gRPC adapter and REST count theirs the same way, docs/robustness.md).
  #budget(bytes: number): void {
    if (this.budget === null || bytes === 0) return;
    if (!this.budget.take(bytes)) {
      this.giveBack();
      throw this.refusals.busy();
    }
    this.#budgeted += bytes;
  }

  // What the budget holds for this body, back; again is nothing.
  giveBack(): void {
    if (this.#budgeted === 0) return;
    this.budget!.give(this.#budgeted);
    this.#budgeted = 0;
  }

  readonly #giveBackAtEnd = (result: IteratorResult<Uint8Array>): IteratorResult<Uint8Array> => {
    if (result.done === true) this.giveBack();
    return result;
  };

  readonly #giveBackOnError = (err: unknown): never => {
    this.giveBack();
    throw err;
  };

  readonly #read = (next: IteratorResult<Uint8Array>): IteratorResult<Uint8Array> | Promise<IteratorResult<Uint8Array>> => {
    if (next.done === true) {
      if (this.enveloped) return this.#ended();
      if (this.#size > this.maxBytes) return DONE;
      const whole = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks, this.#size);
      const counting = this.count(this.wholeFlags, whole);
      return counting === undefined ? DONE : counting.then(() => DONE);
    }
    const chunk = next.value;
    this.#budget(chunk.length);
    if (!this.enveloped) {
      this.#size += chunk.length;
      if (this.#size <= this.maxBytes) this.#chunks.push(chunk);
      else this.#chunks.length = 0;
      return { done: false, value: chunk };
    }
    if (this.#passAll) return { done: false, value: chunk };
    const { whole, counting } = this.#envelopes(chunk);
    // Nothing whole yet: read on rather than pass on an empty chunk.
    if (whole === null) return counting === undefined ? this.next() : counting.then(() => this.next());
    const result = { done: false as const, value: whole };
    return counting === undefined ? result : counting.then(() => result);
  };

  // The body ended inside an envelope: Connect is given that much of it, less than a header, so that it refuses
  // the body as incomplete, as it would have all of it, without allocating the length the header declares. A unary
  // body with bytes after its message is refused here.
  #ended(): IteratorResult<Uint8Array> | Promise<IteratorResult<Uint8Array>> {
    if (this.#afterOne > 0) throw this.#afterOneRefusal();
    const one = this.#one;
    if (one !== null) {
      this.#one = null;
      const result = { done: false as const, value: one.envelope };
      const counting = this.count(one.flags, one.message);
      return counting === undefined ? result : counting.then(() => result);
    }
    if (this.#held.length === 0) return DONE;
    const rest = this.#held[0]!.subarray(0, 1);
    this.#held = [];
    return { done: false, value: rest };
  }

  readonly #failed = (err: unknown): Promise<never> => {
    const turns = this.source.turns;
    if (turns === null) return Promise.reject(err);
    return turns.slot().then(() => Promise.reject(err));
  };

  // Reads the envelopes a chunk completes or continues, counts each completed one, and returns the bytes of the
  // envelopes now whole (null when none is), holding back the rest.
  #envelopes(chunk: Uint8Array): { whole: Uint8Array | null; counting: Promise<void> | undefined } {
    const header = this.#header;
    let pending: Promise<void>[] | undefined;
    const out: Uint8Array[] = [];
    // This chunk's bytes from `start` to `end` (never before `start`) belong to envelopes that are whole and not yet
    // in `out`; what follows `end` belongs to the envelope in progress.
    let start = 0;
    let end = 0;
    let i = 0;
    while (i < chunk.length) {
      if (this.#one !== null) {
        this.#pastOne(chunk.subarray(i));
        i = chunk.length;
        break;
      }
      if (this.#headerFill < ENVELOPE_BYTES) {
        const n = Math.min(ENVELOPE_BYTES - this.#headerFill, chunk.length - i);
        header.set(chunk.subarray(i, i + n), this.#headerFill);
        this.#headerFill += n;
        i += n;
        if (this.#headerFill < ENVELOPE_BYTES) break;
        this.#length = ((header[1]! << 24) | (header[2]! << 16) | (header[3]! << 8) | header[4]!) >>> 0;
        this.#fill = 0;
        if (this.#length > this.maxBytes) {
          this.#passAll = true;
          break;
        }
        // After the size, as the direct gRPC adapter checks them: a header declaring too much is refused for that.
        if ((header[0]! & ~FLAG_COMPRESSED) !== 0) throw this.refusals.malformed();
      }
      const n = Math.min(this.#length - this.#fill, chunk.length - i);
      this.#fill += n;
      i += n;
      if (this.#fill < this.#length) break;
      this.#headerFill = 0;
      let message: Uint8Array;
      // The whole envelope, for a unary call's, which is held back.
      let envelope: Uint8Array | null = null;
      if (this.#held.length === 0) {
        message = chunk.subarray(i - this.#length, i);
        if (this.unary) envelope = chunk.subarray(i - this.#length - ENVELOPE_BYTES, i);
      } else {
        // Begun in an earlier chunk: joined once, for the count and for Connect.
        const joined = Buffer.concat([...this.#held, chunk.subarray(0, i)]);
        this.#held = [];
        if (!this.unary) out.push(joined);
        start = i;
        message = joined.subarray(ENVELOPE_BYTES);
        if (this.unary) envelope = joined;
      }
      if (envelope !== null) {
        this.#one = { flags: header[0]!, envelope, message };
        start = end = i;
        continue;
      }
      end = i;
      const counting = this.count(header[0]!, message);
      if (counting !== undefined) (pending ??= []).push(counting);
    }
    if (this.#passAll) {
      out.push(...this.#held, chunk.subarray(start));
      this.#held = [];
    } else {
      if (end > start) out.push(end - start === chunk.length ? chunk : chunk.subarray(start, end));
      if (end < chunk.length && this.#one === null) this.#held.push(chunk.subarray(end));
    }
    const whole = out.length === 0 ? null : out.length === 1 ? out[0]! : Buffer.concat(out);
    return { whole, counting: pending === undefined ? undefined : Promise.all(pending).then(() => undefined) };
  }

  // Bytes of a unary body after its message: counted, not kept (but a second envelope's header), and refused as too
  // large once the body is, as the gRPC adapter refuses a body that grows past the limit.
  #pastOne(bytes: Uint8Array): void {
    const n = Math.min(ENVELOPE_BYTES - this.#headerFill, bytes.length);
    if (n > 0) this.#header.set(bytes.subarray(0, n), this.#headerFill);
    this.#headerFill += n;
    this.#afterOne += bytes.length;
    if (this.#one!.message.length + this.#afterOne > this.maxBytes) throw this.refusals.tooLarge();
  }

  // The refusal of a unary body with bytes after its message, in the order of the gRPC adapter's checks
  // (`unaryPayload`): no whole header after it, a second message declared too large, one with flags no request has,
  // then not exactly one message if the second is whole, else an incomplete body.
  #afterOneRefusal(): ConnectError {
    if (this.#afterOne < ENVELOPE_BYTES) return this.refusals.malformed();
    const header = this.#header;
    const declared = ((header[1]! << 24) | (header[2]! << 16) | (header[3]! << 8) | header[4]!) >>> 0;
    if (declared > this.maxBytes) return this.refusals.tooLarge();
    if ((header[0]! & ~FLAG_COMPRESSED) !== 0) return this.refusals.malformed();
    return declared <= this.#afterOne - ENVELOPE_BYTES ? this.refusals.notOneMessage() : this.refusals.malformed();
  }
}
