import type { DescField, DescMessage } from "@bufbuild/protobuf";
import { ScalarType } from "@bufbuild/protobuf";
import type { FrameParts } from "../transport/grpc/grpc-unary-adapter.js";

// EncryptResponse and DecryptResponse are an id (string), a version number (int32) and a payload (bytes:
// ciphertext or plaintext) that can be 4 MiB. The gRPC adapter writes them and their 5-byte gRPC envelope into
// one buffer sized up front, where the general encoder would grow its buffer through several copies of the
// payload and then copy it once more into the frame. The field numbers come from the schema, and `frameLayout`
// refuses at start-up a message that has any other field, so a field added to the proto can never be silently
// dropped. test/unit/crypto-response-frame.test.ts checks the bytes against protobuf-es's toBinary.

const ENVELOPE_BYTES = 5;
const WIRE_VARINT = 0;
const WIRE_LENGTH_DELIMITED = 2;

// From this payload size on, a frame is written as its head (the envelope and every byte of the message before the
// payload) followed by the payload as it is, rather than copied into one buffer with it: allocating and copying
// 64 KiB took 3-4% of a 64 KiB Encrypt (bench/README.md). Below it, one buffer costs less than a second write.
export const SEPARATE_PAYLOAD_BYTES = 16 * 1024;

export interface FrameLayout {
  readonly idTag: Buffer;
  readonly versionTag: Buffer;
  readonly payloadTag: Buffer;
}

function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

function writeVarint(buf: Buffer, at: number, n: number): number {
  while (n >= 0x80) {
    buf[at++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  buf[at++] = n;
  return at;
}

function tag(field: DescField, wireType: number): Buffer {
  const key = field.number * 8 + wireType;
  const out = Buffer.alloc(varintSize(key));
  writeVarint(out, 0, key);
  return out;
}

function scalarField(message: DescMessage, localName: string, scalar: ScalarType): DescField {
  const field = message.fields.find((f) => f.localName === localName);
  if (field === undefined || field.fieldKind !== "scalar" || field.scalar !== scalar) {
    throw new Error(`${message.typeName}.${localName} must be a singular ${ScalarType[scalar]} field for its gRPC frame encoder`);
  }
  return field;
}

// The layout of a message of exactly these three fields, in this order of field numbers (the order toBinary
// writes them in, and the payload last, so that it can be written into the tail of the frame).
export function frameLayout(message: DescMessage, id: string, version: string, payload: string): FrameLayout {
  const fields = [scalarField(message, id, ScalarType.STRING), scalarField(message, version, ScalarType.INT32), scalarField(message, payload, ScalarType.BYTES)];
  if (message.fields.length !== fields.length) {
    throw new Error(`${message.typeName} has fields its gRPC frame encoder does not write; extend src/kms/crypto-response-frame.ts`);
  }
  if (!(fields[0]!.number < fields[1]!.number && fields[1]!.number < fields[2]!.number)) {
    throw new Error(`${message.typeName}: its gRPC frame encoder expects ${id} < ${version} < ${payload} by field number`);
  }
  return {
    idTag: tag(fields[0]!, WIRE_LENGTH_DELIMITED),
    versionTag: tag(fields[1]!, WIRE_VARINT),
    payloadTag: tag(fields[2]!, WIRE_LENGTH_DELIMITED),
  };
}

// The whole frame, in one buffer or, for a payload of SEPARATE_PAYLOAD_BYTES or more, in two parts. Fields at their
// default value are left out, as proto3 encoders do. The version is at least 1 here (the handlers reject anything
// else), so it never needs the ten-byte encoding of a negative int32.
export function frameResponse(layout: FrameLayout, id: string, version: number, payload: Uint8Array): Buffer | FrameParts {
  const idBytes = Buffer.byteLength(id);
  let size = 0;
  if (idBytes > 0) size += layout.idTag.length + varintSize(idBytes) + idBytes;
  if (version !== 0) size += layout.versionTag.length + varintSize(version);
  if (payload.length > 0) size += layout.payloadTag.length + varintSize(payload.length) + payload.length;
  const separate = payload.length >= SEPARATE_PAYLOAD_BYTES;
  const frame = Buffer.allocUnsafe(ENVELOPE_BYTES + size - (separate ? payload.length : 0));
  frame[0] = 0;
  frame.writeUInt32BE(size, 1);
  let at = ENVELOPE_BYTES;
  if (idBytes > 0) {
    at += layout.idTag.copy(frame, at);
    at = writeVarint(frame, at, idBytes);
    at += frame.write(id, at, "utf8");
  }
  if (version !== 0) {
    at += layout.versionTag.copy(frame, at);
    at = writeVarint(frame, at, version);
  }
  if (payload.length > 0) {
    at += layout.payloadTag.copy(frame, at);
    at = writeVarint(frame, at, payload.length);
    if (separate) return [frame, payload];
    frame.set(payload, at);
  }
  return frame;
}
