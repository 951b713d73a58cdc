import { maxHeaderSize } from "node:http";

// How large a request head may be over HTTP/2: what Node's HTTP/1.1 parser takes (http.maxHeaderSize, 16 KiB), so
// that a request is refused over both or neither (docs/robustness.md, "Header limits"). Node's HTTP/2 server had
// its own limits: a header list was taken up to 64 KiB and 128 fields, past them the stream reset (REFUSED_STREAM,
// which clients retry; ENHANCE_YOUR_CALM), and the SETTINGS announced no limit at all.
export const MAX_HEAD_BYTES = maxHeaderSize;

// `name: value` and CRLF: each field is counted as HTTP/1.1 carries it, the pseudo-headers standing for the request
// line and Host, so that the same request measures (within a few bytes) the same over both.
const LINE_BYTES = 4;

// What SETTINGS_MAX_HEADER_LIST_SIZE announces, and what nghttp2 then enforces by resetting the stream: Node's own
// default, which nghttp2 applies until the client acknowledges the SETTINGS. Announcing MAX_HEAD_BYTES itself made
// the answer to one head depend on its stream: a 17 KB head got the 431 below on a session's first stream but
// RST_STREAM(ENHANCE_YOUR_CALM), with no word of why, on every later one (a property test, 2026-11-28). The
// announcement is advisory (RFC 9113 10.5.1), and 431 is the refusal it names for a head the server will not take.
export const ANNOUNCED_HEADER_LIST_BYTES = 65535;

// Fields Node's HTTP/2 server reads before resetting the stream (maxHeaderListPairs): more than a head within
// MAX_HEAD_BYTES can hold (a field takes at least a one-byte name and its line), so that the size decides, as over
// HTTP/1.1.
export const MAX_HEAD_FIELDS = Math.ceil(MAX_HEAD_BYTES / (1 + LINE_BYTES)) + 1;

// The head's size as HTTP/1.1 would count it, from a stream's raw header list ([name, value, name, value, ...]).
// Header strings are Latin-1, one character per byte.
export function http2HeadBytes(rawHeaders: readonly string[]): number {
  let bytes = 0;
  for (let i = 0; i < rawHeaders.length; i++) bytes += rawHeaders[i]!.length;
  return bytes + (rawHeaders.length / 2) * LINE_BYTES;
}
