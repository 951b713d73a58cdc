// HTTP/2 written by hand, for what Node's client will not send: frames in any order, a window held at 0, resets
// right after headers, duplicated fields.

// The client connection preface (RFC 9113 3.4).
export const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

// One HTTP/2 frame: 24-bit length, type, flags, stream id, payload.
export function h2Frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId, 5);
  return Buffer.concat([head, payload]);
}

// An HPACK header field, literal without indexing, its name taken from the static table; values of at most 126
// bytes (a one-byte length).
export function hpackLiteral(nameIndex: number[], value: string): Buffer {
  const v = Buffer.from(value);
  if (v.length > 126) throw new Error(`hpackLiteral: a value of ${v.length} bytes needs a longer length prefix`);
  return Buffer.concat([Buffer.from(nameIndex), Buffer.from([v.length]), v]);
}

// An HPACK header field, literal without indexing, with its name written out; name and value of at most 126 bytes.
export function hpackNamed(name: string, value: string): Buffer {
  return Buffer.concat([Buffer.from([0x00, name.length]), Buffer.from(name), hpackLiteral([], value)]);
}
