// Buffers for gRPC request bodies that arrive in more than one chunk (from about 16 KiB: one HTTP/2 DATA frame),
// used again by later calls instead of allocated for each one.
//
// Why: V8 counts every buffer Node allocates outside its heap (a body joined with Buffer.concat, and the socket
// reads its chunks are views of) as "external memory", and starts a full garbage collection each time that has
// grown by 64 MB since the last. Under 64 KiB Encrypts the chunks of bodies still arriving kept whole socket reads
// alive into the old generation, and V8 ran about nine full collections a second, a sixth of the process's time
// (bench/README.md, "Request bodies in pooled buffers"). Copied into a pooled buffer as they arrive, the chunks
// die young, and a body allocates nothing.
//
// Sizes come in classes of 2^k and 1.5 × 2^k bytes, so that a body uses at least two thirds of the buffer it is
// given. Bodies larger than MAX_POOLED_BYTES get a buffer of their own, which is never kept. The pool keeps at most
// `maxIdleBytes` of buffers nobody uses; one given back past that is left to the garbage collector.

export const MIN_POOLED_BYTES = 32 * 1024;
// What the server's pool keeps idle at most.
export const BODY_POOL_IDLE_BYTES = 16 * 1024 * 1024;
export const MAX_POOLED_BYTES = 1024 * 1024;

// The smallest class that holds `bytes`; `bytes` itself above MAX_POOLED_BYTES.
export function capacityFor(bytes: number): number {
  if (bytes > MAX_POOLED_BYTES) return bytes;
  let size = MIN_POOLED_BYTES;
  for (;;) {
    if (bytes <= size) return size;
    if (bytes <= size * 1.5) return size * 1.5;
    size *= 2;
  }
}

export class BodyPool {
  readonly #idle = new Map<number, Buffer[]>();
  #idleBytes = 0;

  constructor(readonly maxIdleBytes: number) {}

  // A buffer of at least `bytes` bytes. It holds what an earlier call left in it: the caller reads only what it
  // wrote itself.
  take(bytes: number): Buffer {
    const capacity = capacityFor(bytes);
    const buffer = this.#idle.get(capacity)?.pop();
    if (buffer === undefined) return Buffer.allocUnsafeSlow(capacity);
    this.#idleBytes -= capacity;
    return buffer;
  }

  // Back to the pool, once nothing reads or writes the buffer any more (the caller's promise: a buffer still in use
  // by anyone else would be handed to the next call and overwritten).
  give(buffer: Buffer): void {
    const capacity = buffer.length;
    if (capacity > MAX_POOLED_BYTES || this.#idleBytes + capacity > this.maxIdleBytes) return;
    let idle = this.#idle.get(capacity);
    if (idle === undefined) this.#idle.set(capacity, (idle = []));
    idle.push(buffer);
    this.#idleBytes += capacity;
  }

  get idleBytes(): number {
    return this.#idleBytes;
  }
}
