import { randomFillSync } from "node:crypto";

// New request ids: random (version 4) UUIDs, as crypto.randomUUID makes them, for every call whose caller sent no
// id of its own. randomUUID assembles each from 20 string pieces, 587 bytes of garbage per id, about 3% of what a
// 1 KiB gRPC Encrypt allocates (bench/README.md); here the 36 characters are written into a scratch buffer and
// read out as one string, 58 bytes. The random bits come from a pool of CSPRNG output, each byte used once, refilled
// every 256 ids (randomUUID refills every 128).
const ID_BYTES = 16;
const pool = Buffer.allocUnsafe(ID_BYTES * 256);
let poolOffset = pool.length;
const text = Buffer.allocUnsafe(36);
const HEX = Buffer.from("0123456789abcdef", "latin1");
// Where each of the 16 bytes goes in "xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx".
const POSITIONS = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
text.fill("-");

export function newRequestId(): string {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const at = poolOffset;
  poolOffset += ID_BYTES;
  for (let i = 0; i < ID_BYTES; i++) {
    let b = pool[at + i]!;
    // The version (4) in the high nibble of byte 6, the variant (binary 10) in the top bits of byte 8 (RFC 9562).
    if (i === 6) b = (b & 0x0f) | 0x40;
    else if (i === 8) b = (b & 0x3f) | 0x80;
    const p = POSITIONS[i]!;
    text[p] = HEX[b >> 4]!;
    text[p + 1] = HEX[b & 0x0f]!;
  }
  return text.toString("latin1");
}
