// EncryptResponse and DecryptResponse share one wire layout: key_id (1, string), key_version_id (2, int32) and
// the payload (3, bytes: ciphertext or plaintext). The gRPC fast path writes that message and its 5-byte gRPC
// envelope into one buffer sized up front, where the general encoder would grow its buffer through several
// copies of a 64 KiB payload and then copy it once more into the frame; Encrypt even seals straight into it. test/unit/crypto-response-frame.test.ts
// checks the bytes against protobuf-es's toBinary.

const ENVELOPE_BYTES = 5;

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

// The frame with everything but the payload written; the payload (the last field) goes into its last
// `payloadLength` bytes, so a caller can write it there directly. Fields at their default value are left out, as
// proto3 encoders do. keyVersionId is at least 1 here (the handlers reject anything else), so it never needs the
// ten-byte encoding of a negative int32.
export function cryptoResponseFrame(keyId: string, keyVersionId: number, payloadLength: number): Buffer {
  const idBytes = Buffer.byteLength(keyId);
  let size = 0;
  if (idBytes > 0) size += 1 + varintSize(idBytes) + idBytes;
  if (keyVersionId !== 0) size += 1 + varintSize(keyVersionId);
  if (payloadLength > 0) size += 1 + varintSize(payloadLength) + payloadLength;
  const frame = Buffer.allocUnsafe(ENVELOPE_BYTES + size);
  frame[0] = 0;
  frame.writeUInt32BE(size, 1);
  let at = ENVELOPE_BYTES;
  if (idBytes > 0) {
    frame[at++] = 0x0a;
    at = writeVarint(frame, at, idBytes);
    at += frame.write(keyId, at, "utf8");
  }
  if (keyVersionId !== 0) {
    frame[at++] = 0x10;
    at = writeVarint(frame, at, keyVersionId);
  }
  if (payloadLength > 0) {
    frame[at++] = 0x1a;
    writeVarint(frame, at, payloadLength);
  }
  return frame;
}

export function frameCryptoResponse(keyId: string, keyVersionId: number, payload: Uint8Array): Buffer {
  const frame = cryptoResponseFrame(keyId, keyVersionId, payload.length);
  frame.set(payload, frame.length - payload.length);
  return frame;
}
