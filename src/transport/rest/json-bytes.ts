import { ScalarType } from "@bufbuild/protobuf";
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import { hasCustomJsonRepresentation } from "@bufbuild/protobuf/wkt";

// Bytes fields in JSON, with Node's native base64 instead of protobuf-es's. Node 20 has no
// Uint8Array.prototype.toBase64/setFromBase64, so protobuf-es falls back to loops in JavaScript: for a 1 KiB
// Encrypt over REST, decoding the plaintext and encoding the ciphertext (a string built by `+=` one character at a
// time, which JSON.stringify then has to flatten) took about a third of the call's instructions. The results are
// the very same: standard base64 with padding out; in, whatever protobuf-es accepts, since only the plain forms
// are decoded here and every other string is left to it.

// The bytes of a base64 string made only of the alphabets' characters (protobuf-es accepts both, even mixed, and
// so does Node), unpadded or padded to a multiple of four: exactly what protobuf-es's base64Decode returns for it.
// Undefined for any other string, which protobuf-es then reads or refuses itself.
//
// No pattern test (two passes of a regular expression over a 1 KiB plaintext cost more than the decoding): Node's
// decoder skips any other character, and stops at a "=", so one that is not a trailing pad makes it write fewer
// bytes than the length promises (each missing character takes away at least one byte, since 3n/4 and 3(n-1)/4
// never round down to the same whole number). A length of 4n+1 is refused by protobuf-es and read by Node.
export function decodePlainBase64(text: string): Uint8Array | undefined {
  const len = text.length;
  if ((len & 3) === 1) return undefined;
  // Only ASCII: Node's decoder reads a character above U+00FF by its low byte, so "Ł" (U+0141) was read as "A", and
  // REST encrypted bytes the caller never sent where protobuf-es refuses the string (a probe). A UTF-8 length equal
  // to the string's holds exactly for ASCII, and Node counts it natively.
  if (Buffer.byteLength(text, "utf8") !== len) return undefined;
  // protobuf-es's size: three bytes per four characters, less one per padding character.
  let size = len - ((len + 3) >> 2);
  if ((len & 3) === 0 && text.charCodeAt(len - 1) === 61) size -= text.charCodeAt(len - 2) === 61 ? 2 : 1;
  // Node sizes its buffer from the length as this does, and returns a shorter one when it wrote less. Small
  // results come from Node's buffer pool, so the view handed out is a plain Uint8Array, as protobuf-es's is.
  const decoded = Buffer.from(text, "base64");
  return decoded.length === size ? new Uint8Array(decoded.buffer, decoded.byteOffset, size) : undefined;
}

// Standard base64 with padding, as protobuf-es's toJson writes bytes.
export function encodeBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

// A message's top-level singular bytes fields (outside oneofs), the ones handled here; none for a well-known type
// with a JSON form of its own (google.protobuf.BytesValue is a bare string). Computed once per message type.
const plainBytesFields = new WeakMap<DescMessage, readonly DescField[]>();

export function bytesFieldsOf(desc: DescMessage): readonly DescField[] {
  let fields = plainBytesFields.get(desc);
  if (fields === undefined) {
    fields = hasCustomJsonRepresentation(desc)
      ? []
      : desc.fields.filter((f) => f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES && f.oneof === undefined);
    plainBytesFields.set(desc, fields);
  }
  return fields;
}
