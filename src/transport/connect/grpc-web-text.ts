import type { ConnectError } from "@connectrpc/connect";
import { grpcWebContentTypeJson, grpcWebContentTypeProto, parseGrpcWebContentType } from "./connect-internals.js";
import type { UniversalServerRequest, UniversalServerResponse } from "./connect-internals.js";

// gRPC-web's text form (PROTOCOL-WEB.md, "Text-encoded (response) streams"): the same envelopes as the binary form,
// in base64, as `application/grpc-web-text`. It is the default mode of the grpc-web JavaScript client
// (protoc-gen-grpc-web's mode=grpcwebtext) and the only one in which it streams, so browsers using that client send
// it. connect-node serves only the binary form and refuses the text one with 415; this turns a text request into
// the binary request Connect serves, and its answer back into text. Everything else about the call (limits,
// the pipeline, errors in the trailer frame) is the binary form's: the decoded bytes are what Connect and the
// counted body read.

const TEXT_PROTO = "application/grpc-web-text+proto";
const TEXT_JSON = "application/grpc-web-text+json";

// A Connect-served request in the text form, as the same request in the binary form; null when it is not in the text
// form. `refuse` is the error a body that is not base64 ends with.
export function binaryFromText(req: UniversalServerRequest, refuse: () => ConnectError): UniversalServerRequest | null {
  const type = parseGrpcWebContentType(req.header.get("content-type"));
  if (type === undefined || !type.text) return null;
  const header = new Headers(req.header);
  header.set("content-type", type.binary ? grpcWebContentTypeProto : grpcWebContentTypeJson);
  // It counted base64 characters, not the bytes Connect will read.
  header.delete("content-length");
  const body = req.body;
  const decoded = typeof body === "object" && body !== null && Symbol.asyncIterator in body ? new Base64Decoded(body as AsyncIterable<Uint8Array>, refuse) : body;
  return { ...req, header, body: decoded };
}

// The answer to a request that came in the text form, in the text form: each chunk (connect-node yields every frame
// as one) in base64 of its own, padded, as the specification lets a server flush a frame ("the server runtime will
// always base64-encode and flush gRPC messages atomically"); the grpc-web client decodes such segments one after
// the other. A gRPC-web answer without a body (its status in the headers) says the text form's content type too. An
// answer that is not gRPC-web (Connect's bodiless refusals of a request's HTTP method) goes out as it is.
export function textFromBinary(res: UniversalServerResponse): UniversalServerResponse {
  const type = parseGrpcWebContentType(res.header?.get("content-type") ?? null);
  if (type === undefined) return res;
  const header = new Headers(res.header);
  header.set("content-type", type.binary ? TEXT_PROTO : TEXT_JSON);
  header.delete("content-length");
  return { ...res, header, body: res.body === undefined ? undefined : new Base64Encoded(res.body) };
}

// An iterator over another's chunks, written out (not a generator), so that closing it (the peer left, or Connect
// stopped reading) closes the other even when no chunk was read yet, and connect-node's cleanup in it runs.
abstract class ChunkIterator implements AsyncIterable<Uint8Array>, AsyncIterator<Uint8Array> {
  #it: AsyncIterator<Uint8Array> | null = null;

  constructor(private readonly chunks: AsyncIterable<Uint8Array>) {}

  // The other iterator, made on first use.
  protected get source(): AsyncIterator<Uint8Array> {
    return (this.#it ??= this.chunks[Symbol.asyncIterator]());
  }

  [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    return this;
  }

  abstract next(): Promise<IteratorResult<Uint8Array>>;

  async return(value?: unknown): Promise<IteratorResult<Uint8Array>> {
    return (await this.source.return?.(value)) ?? { done: true, value: undefined };
  }
}

// The answer's chunks in base64.
class Base64Encoded extends ChunkIterator {
  async next(): Promise<IteratorResult<Uint8Array>> {
    const result = await this.source.next();
    if (result.done === true) return result;
    return { done: false, value: Buffer.from(bufferOf(result.value).toString("base64"), "latin1") };
  }
}

// The request's base64 as bytes, decoded as it arrives: whole groups of four characters at a time, the rest (at
// most three) held for the next chunk. Padding may end any group, as a client that flushes its frames one by one
// would send them; a character outside the alphabet, misplaced padding or a body that ends inside a group ends the
// body with `refuse`. Nothing is held but those three characters: the limits of the decoded bytes are the counted
// body's (counted-body.ts), which reads this.
export class Base64Decoded extends ChunkIterator {
  #held = "";

  constructor(
    chunks: AsyncIterable<Uint8Array>,
    private readonly refuse: () => ConnectError,
  ) {
    super(chunks);
  }

  async next(): Promise<IteratorResult<Uint8Array>> {
    for (;;) {
      const result = await this.source.next();
      if (result.done === true) {
        if (this.#held !== "") throw this.refuse();
        return result;
      }
      const text = this.#held + bufferOf(result.value).toString("latin1");
      const whole = text.length - (text.length % 4);
      this.#held = text.slice(whole);
      // A chunk of fewer than four characters in all: nothing to pass on yet.
      if (whole > 0) return { done: false, value: decodeGroups(text.slice(0, whole), this.refuse) };
    }
  }
}

const NOT_BASE64 = /[^A-Za-z0-9+/=]/;

// Whole groups of four base64 characters, each possibly padded, as bytes. Node's decoder skips characters it does
// not know and stops at the first padding, so the text is checked first, and decoded a padded run at a time.
export function decodeGroups(text: string, refuse: () => ConnectError): Uint8Array {
  if (NOT_BASE64.test(text)) throw refuse();
  const runs: Buffer[] = [];
  let start = 0;
  for (let pad = text.indexOf("="); pad >= 0; pad = text.indexOf("=", pad + 1)) {
    const place = pad % 4;
    // "xx==" or "xxx=": padding only in the last one or two places of a group.
    if (place < 2 || (place === 2 && text.charCodeAt(pad + 1) !== 0x3d)) throw refuse();
    if (place === 2) pad++;
    runs.push(Buffer.from(text.slice(start, pad + 1), "base64"));
    start = pad + 1;
  }
  if (start === 0) return Buffer.from(text, "base64");
  if (start < text.length) runs.push(Buffer.from(text.slice(start), "base64"));
  return Buffer.concat(runs);
}

function bufferOf(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
