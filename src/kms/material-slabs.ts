// The unwrapped material of every cached key version, 32 bytes a version (an AES-128 or AES-192 key uses the
// start of its slot) in slabs of 64 KiB shared by all versions. A buffer of its own per version cost about 0.3 KB
// of memory besides the material: a typed array object, then, once the first Encrypt took a view of it, an
// ArrayBuffer, its native backing store and its allocation. Here a version keeps only the number of its slot, and
// a call takes a view of the slot for as long as it runs.
//
// A slot belongs to the object that took it (the cached version) and is freed, zeroed first, only once that object
// has been garbage-collected: so no call that can still reach the version can see its slot zeroed or given to
// another key, whatever the cache evicted or replaced meanwhile. The slabs grow to the versions alive (cached, or
// evicted and not yet collected) and are kept for reuse.

export const SLOT_BYTES = 32;
const SLOTS_PER_SLAB = 2048;

export class MaterialSlabs {
  private readonly slabs: Buffer[] = [];
  // Slot numbers free for reuse, taken last in, first out.
  private readonly free: number[] = [];
  private readonly released = new FinalizationRegistry<number>((slot) => this.release(slot));

  // Copies `material` (at most SLOT_BYTES) into a free slot that `owner` holds until it is collected.
  store(owner: object, material: Uint8Array): number {
    if (material.length > SLOT_BYTES) throw new Error(`key material of ${material.length} bytes does not fit a ${SLOT_BYTES}-byte slot`);
    const slot = this.free.pop() ?? this.grow();
    this.slabs[Math.floor(slot / SLOTS_PER_SLAB)]!.set(material, (slot % SLOTS_PER_SLAB) * SLOT_BYTES);
    this.released.register(owner, slot);
    return slot;
  }

  // The first `length` bytes of a slot, as a view: valid while the slot's owner is reachable.
  view(slot: number, length: number): Buffer {
    const at = (slot % SLOTS_PER_SLAB) * SLOT_BYTES;
    return this.slabs[Math.floor(slot / SLOTS_PER_SLAB)]!.subarray(at, at + length);
  }

  // Slots taken and not yet freed (tests read it).
  get slotsInUse(): number {
    return this.slabs.length * SLOTS_PER_SLAB - this.free.length;
  }

  private grow(): number {
    // allocUnsafeSlow: a slab of its own, never a slice of Node's shared pool. Slots are written before use.
    this.slabs.push(Buffer.allocUnsafeSlow(SLOTS_PER_SLAB * SLOT_BYTES));
    const first = (this.slabs.length - 1) * SLOTS_PER_SLAB;
    // Pushed so that the lowest slot is popped first.
    for (let slot = first + SLOTS_PER_SLAB - 1; slot > first; slot--) this.free.push(slot);
    return first;
  }

  private release(slot: number): void {
    const at = (slot % SLOTS_PER_SLAB) * SLOT_BYTES;
    this.slabs[Math.floor(slot / SLOTS_PER_SLAB)]!.fill(0, at, at + SLOT_BYTES);
    this.free.push(slot);
  }
}
