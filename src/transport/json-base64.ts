// Bytes in proto3 JSON are "standard or URL-safe base64 encoding with/without paddings" and nothing else. protobuf-es
// reads any string leniently: it skips characters outside the alphabets (spaces, "*", "é") and stops at the first "=",
// so "aGk=aGk=" was read as "hihi", "aG k=" as "hi", and an additionalAuthenticatedData of "a===" or " " as no data
// at all: an Encrypt bound to nothing, which a Decrypt without any AAD then opened (a probe, 2026-11-28). Every
// JSON bytes value, REST's and Connect's, is held to this decoder: a string it refuses is refused as an invalid
// value (json-misread.ts), before protobuf-es sees it.
//
// Node's native decoder does the work (Node 20 has no Uint8Array.prototype.setFromBase64; protobuf-es's fallback is a
// loop in JavaScript, and a regular expression over a 1 KiB plaintext costs four times the decoding). It too skips
// any other character and stops at a "=", so one that is not a trailing pad makes it write fewer bytes than the
// length promises (each missing character takes away at least one byte, since 3n/4 and 3(n-1)/4 never round down to
// the same whole number): that is how such strings are told apart without a pattern test.

// The bytes of `text` when it is base64 in one alphabet, unpadded or padded to a multiple of four; else undefined.
export function decodeStrictBase64(text: string): Uint8Array | undefined {
  const len = text.length;
  if ((len & 3) === 1) return undefined;
  // Only ASCII: Node's decoder reads a character above U+00FF by its low byte, so "Ł" (U+0141) was read as "A". A
  // UTF-8 length equal to the string's holds exactly for ASCII, and Node counts it natively.
  if (Buffer.byteLength(text, "utf8") !== len) return undefined;
  // One alphabet or the other: Node reads "+" and "-" alike, but "+/-_" is neither form (grpc-gateway refuses it).
  if ((text.includes("-") || text.includes("_")) && (text.includes("+") || text.includes("/"))) return undefined;
  // Three bytes per four characters, less one per padding character.
  let size = len - ((len + 3) >> 2);
  if ((len & 3) === 0 && text.charCodeAt(len - 1) === 61) size -= text.charCodeAt(len - 2) === 61 ? 2 : 1;
  // Node sizes its buffer from the length as this does, and returns a shorter one when it wrote less. Small
  // results come from Node's buffer pool, so the view handed out is a plain Uint8Array, as protobuf-es's is.
  const decoded = Buffer.from(text, "base64");
  return decoded.length === size ? new Uint8Array(decoded.buffer, decoded.byteOffset, size) : undefined;
}
