import type { ConnectError } from "@connectrpc/connect";
import type { ViolationList } from "../../errors/violation-list.js";
import type { MessageLimits } from "../../pipeline/message-limits.js";
import { acceptedCompressions } from "../compression.js";
import { UnknownJsonField, countJson } from "../limits/json-count.js";
import { countWireInTurns } from "../limits/wire-count.js";
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
// body over the size limit, an unknown compression, data that does not decompress, gRPC-web's text form) is passed
// on uncounted for Connect to refuse.

const ENVELOPE_BYTES = 5;
const FLAG_COMPRESSED = 0x01;
// Connect's end-of-stream and gRPC-web's trailers: not messages.
const FLAG_NOT_A_MESSAGE = 0x02 | 0x80;

type Refuse = (violations: ViolationList) => ConnectError;

interface Framing {
  enveloped: boolean;
  binary: boolean;
  // The compression the messages come in, null for none; undefined for one Connect will refuse.
  compression: Compression | null | undefined;
}

export function countedRequest(req: UniversalServerRequest, limits: MessageLimits, maxBytes: number, refuse: Refuse): UniversalServerRequest {
  const body = req.body;
  if (req.method !== "POST" || typeof body !== "object" || body === null || !(Symbol.asyncIterator in body)) return req;
  const framing = framingOf(req.header);
  if (framing === null) return req;
  const count = async (flags: number, message: Uint8Array): Promise<void> => {
    if ((flags & FLAG_NOT_A_MESSAGE) !== 0) return;
    let bytes = message;
    if ((flags & FLAG_COMPRESSED) !== 0) {
      if (framing.compression == null) return;
      try {
        bytes = await framing.compression.decompress(message, maxBytes);
      } catch {
        return;
      }
    }
    // Connect's JSON ignores unknown members: they are counted with the values beyond the type's fields.
    const over = framing.binary ? await countWireInTurns(limits, bytes) : countJson(limits, bytes, { unknownFields: "count" });
    if (over !== null && !(over instanceof UnknownJsonField)) throw refuse(over);
  };
  const counted = framing.enveloped ? countEnvelopes(body, maxBytes, count) : countWhole(body, maxBytes, framing.compression === null ? 0 : FLAG_COMPRESSED, count);
  return { ...req, body: counted };
}

// How the protocol Connect will pick for this content type frames its messages; null when none will.
function framingOf(header: Headers): Framing | null {
  const contentType = header.get("content-type");
  const grpc = parseGrpcContentType(contentType);
  if (grpc !== undefined) return { enveloped: true, binary: grpc.binary, compression: compressionOf(header.get("grpc-encoding")) };
  const grpcWeb = parseGrpcWebContentType(contentType);
  if (grpcWeb !== undefined) return grpcWeb.text ? null : { enveloped: true, binary: grpcWeb.binary, compression: compressionOf(header.get("grpc-encoding")) };
  const connect = parseConnectContentType(contentType);
  if (connect === undefined) return null;
  const encoding = header.get(connect.stream ? "connect-content-encoding" : "content-encoding");
  return { enveloped: connect.stream, binary: connect.binary, compression: compressionOf(encoding) };
}

function compressionOf(name: string | null): Compression | null | undefined {
  if (name === null || name === "identity") return null;
  return acceptedCompressions.find((c) => c.name === name);
}

type Count = (flags: number, message: Uint8Array) => Promise<void>;

// Envelopes, counted each as it completes, before the chunk that completes it is passed on.
async function* countEnvelopes(body: AsyncIterable<Uint8Array>, maxBytes: number, count: Count): AsyncIterable<Uint8Array> {
  const header = new Uint8Array(ENVELOPE_BYTES);
  let headerFill = 0;
  let length = 0;
  // The message so far, or null when it is over the size limit (Connect refuses it) or not started.
  let message: Uint8Array | null = null;
  let fill = 0;
  for await (const chunk of body) {
    let i = 0;
    while (i < chunk.length) {
      if (headerFill < ENVELOPE_BYTES) {
        const n = Math.min(ENVELOPE_BYTES - headerFill, chunk.length - i);
        header.set(chunk.subarray(i, i + n), headerFill);
        headerFill += n;
        i += n;
        if (headerFill < ENVELOPE_BYTES) break;
        length = ((header[1]! << 24) | (header[2]! << 16) | (header[3]! << 8) | header[4]!) >>> 0;
        fill = 0;
        // Most messages arrive within one chunk: counted where they are.
        if (length <= maxBytes && chunk.length - i >= length) {
          message = chunk.subarray(i, i + length);
          fill = length;
          i += length;
        } else message = length <= maxBytes ? new Uint8Array(length) : null;
      } else {
        const n = Math.min(length - fill, chunk.length - i);
        message?.set(chunk.subarray(i, i + n), fill);
        fill += n;
        i += n;
      }
      if (fill === length) {
        if (message !== null) await count(header[0]!, message);
        headerFill = 0;
        message = null;
      }
    }
    yield chunk;
  }
}

// A whole body, counted once it has all arrived, before its end is passed on.
async function* countWhole(body: AsyncIterable<Uint8Array>, maxBytes: number, flags: number, count: Count): AsyncIterable<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size <= maxBytes) chunks.push(chunk);
    yield chunk;
  }
  if (size > maxBytes) return;
  await count(flags, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
}
