// Short strings kept as UTF-8 bytes in one buffer, a fixed number of bytes per slot, instead of as strings on the
// heap: what the key cache keeps per key for as long as the key is cached, and lets go when it is evicted, would
// otherwise pile up in V8's old generation until its next major collection. A string longer than a slot is not
// kept here (set answers false) and the caller keeps it as a string.
export class InlineStrings {
  private bytes = Buffer.alloc(0);
  // The length in bytes of each slot's string, or -1 for none.
  private lengths = new Int16Array(0);

  constructor(private readonly width: number) {}

  // Makes room for `slots` slots, keeping what is there.
  grow(slots: number): void {
    const bytes = Buffer.alloc(slots * this.width);
    this.bytes.copy(bytes);
    this.bytes = bytes;
    const lengths = new Int16Array(slots).fill(-1);
    lengths.set(this.lengths);
    this.lengths = lengths;
  }

  // Keeps `value` at `slot` if it fits; answers whether it did.
  set(slot: number, value: string): boolean {
    // UTF-8 takes at least one byte per UTF-16 unit, so a longer string cannot fit.
    const bytes = value.length > this.width ? this.width + 1 : Buffer.byteLength(value, "utf8");
    if (bytes > this.width) {
      this.lengths[slot] = -1;
      return false;
    }
    this.bytes.write(value, slot * this.width, bytes, "utf8");
    this.lengths[slot] = bytes;
    return true;
  }

  // The string at `slot`, or undefined when none is kept there.
  get(slot: number): string | undefined {
    const length = this.lengths[slot]!;
    return length < 0 ? undefined : this.bytes.toString("utf8", slot * this.width, slot * this.width + length);
  }

  // Whether `value` is the string at `slot`, without making a string: lookups compare ids this way.
  equals(slot: number, value: string): boolean {
    const length = this.lengths[slot]!;
    if (length < 0 || value.length > length) return false;
    const at = slot * this.width;
    for (let i = 0; i < value.length; i++) {
      const c = value.charCodeAt(i);
      if (c >= 0x80) return this.bytes.subarray(at, at + length).equals(Buffer.from(value, "utf8"));
      if (this.bytes[at + i] !== c) return false;
    }
    return value.length === length;
  }

  clear(slot: number): void {
    this.lengths[slot] = -1;
  }
}
