import { ScalarType } from "@bufbuild/protobuf";
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import { hasCustomJsonRepresentation } from "@bufbuild/protobuf/wkt";

// Bytes fields in REST's JSON written with Node's native base64 instead of protobuf-es's: Node 20 has no
// Uint8Array.prototype.toBase64, so protobuf-es falls back to a loop in JavaScript; for a 1 KiB Encrypt over REST,
// decoding the plaintext and encoding the ciphertext (a string built by `+=` one character at a time, which
// JSON.stringify then has to flatten) took about a third of the call's instructions. The text is the very same:
// standard base64 with padding. They are read with ../json-base64.ts, which holds them to the proto3 JSON forms.

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
