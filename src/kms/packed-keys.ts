import { randomBytes } from "node:crypto";
import type { EntryVersion, CachedKey, KeyEntry } from "./cached-key.js";
import { InlineStrings } from "./inline-strings.js";
import type { VersionKey } from "./ciphertext.js";
import type { KeyView } from "./key-manager.js";
import { algorithms, keyLengthBytes, versionStates } from "./model.js";
import type { Algorithm, CryptoKeyRecord, VersionInfo, VersionState } from "./model.js";

// The entries the key cache holds, packed: numbers in typed arrays, strings in one array, the unwrapped material
// of ENABLED versions in one buffer, each key and each version at a slot reused once its entry goes, and the index
// from key id to slot an open-addressing hash table in a typed array, with the order of installation a list
// through the slots. A cache of objects (one per key, one per version, a frozen record) in a Map cost 527 bytes of
// heap a key; V8 lets the old generation grow to several times what it holds before it collects, so a sweep over
// more keys than the cache held took the process from 95 to 482 MiB RSS (docs/performance.md). The Map was garbage
// too: deleting its oldest entry leaves a hole that the next oldest-entry lookup walks past, and the table is
// copied whole (7 MB at 100,000 keys) whenever the holes fill it. Packed, a key costs the heap its row of the string
// array (its id and name are bytes, inline-strings.ts, unless they are long), and an evicted key leaves nothing.
//
// A read gets a handle (PackedEntry) that is valid until its entry is evicted or replaced: the key manager uses
// a handle only in the synchronous turn it got it in, and every read through a handle checks the slot's stamp,
// which changes when the slot is freed, so that a handle kept too long fails loudly instead of reading another
// key. The record that key reads return is built on the first read and kept with the entry, so that its frozen
// CryptoKey message (kms-service.ts) is shared while the entry lives.

const NONE = -1;
const MATERIAL_BYTES = 32;
const FIRST_SLOTS = 1024;

// Per key. Numbers (times, and version ids, which go up to 2^32 - 1): createdAt, goneAt, rotationPeriodMs,
// nextRotationAt, primaryVersionId, nextVersionId (NaN for null).
const NUMBERS = 6;
const CREATED = 0;
const GONE = 1;
const ROTATION_PERIOD = 2;
const NEXT_ROTATION = 3;
const PRIMARY = 4;
const NEXT_VERSION_ID = 5;
// Ints: the first and the last version's slot, the stamp, the id's hash, and the slots installed just before and just
// after. The last version is looked at first: Encrypt mostly names the newest version (the primary after a rotation),
// and a walk from the first to it took 6.5 µs at 3,000 versions, a tenth of a call.
const INTS = 6;
const FIRST_VERSION = 0;
const STAMP = 1;
const HASH = 2;
const OLDER = 3;
const NEWER = 4;
const LAST_VERSION = 5;
// Strings and objects: id and name when they are too long to keep inline, description, parentId, owner, labels,
// the record once built.
const REFS = 7;
const ID = 0;
const NAME = 1;
const DESCRIPTION = 2;
const PARENT = 3;
const OWNER = 4;
const LABELS = 5;
const RECORD = 6;
// Ids the server makes have 20 characters; most names are short.
const INLINE_ID_BYTES = 24;
const INLINE_NAME_BYTES = 32;

// Per version. Numbers: id, createdAt, destroyAt. Next: the next version's slot (versions are linked in id order).
// Codes: state, algorithm, whether the material is there (ENABLED only).
const V_NUMBERS = 3;
const V_CODES = 3;

function orNaN(n: number | null): number {
  return n === null ? Number.NaN : n;
}

function orNull(n: number): number | null {
  return Number.isNaN(n) ? null : n;
}

function grown<T extends Float64Array | Int32Array | Uint8Array>(old: T, length: number): T {
  const next = new (old.constructor as new (n: number) => T)(length);
  next.set(old);
  return next;
}

// What a packed key costs, in units of about a KiB: one, and one more for each KiB of its description, labels and
// versions. KEY_CACHE_SIZE bounds the sum, so that keys with the most text a caller may give them (a 1,024-character
// description, 64 labels of 128 characters: about 23 KiB of heap) or thousands of versions count for what they hold;
// counted by keys alone, 100,000 such keys took 2.2 GB where docs/performance.md promised 200 MiB (a probe,
// 2026-11-28).
function weightOf(description: string, labels: readonly string[], versions: number): number {
  let chars = description.length + versions * VERSION_CHARS;
  for (const label of labels) chars += label.length;
  return 1 + Math.floor(chars / 1024);
}
// A version's slots (numbers, codes, material) and its share of the arrays, counted as characters of text.
const VERSION_CHARS = 64;

export class PackedKeys {
  private keySlots = 0;
  private totalWeight = 0;
  private numbers = new Float64Array(0);
  private ints = new Int32Array(0);
  private defaultAlgorithms = new Uint8Array(0);
  private refs: unknown[] = [];
  private readonly ids = new InlineStrings(INLINE_ID_BYTES);
  private readonly names = new InlineStrings(INLINE_NAME_BYTES);
  private readonly freeKeys: number[] = [];
  // Slot + 1 of the key whose id hashes there or, probing on, after; 0 for none. At most half full.
  private buckets = new Int32Array(0);
  // Seeded per process, so that no one can pick ids that collide.
  private readonly seed = randomBytes(4).readInt32LE(0);
  private oldestSlot = NONE;
  private newestSlot = NONE;
  private count = 0;

  private versionSlots = 0;
  private vNumbers = new Float64Array(0);
  private vNext = new Int32Array(0);
  private vCodes = new Uint8Array(0);
  private material = Buffer.alloc(0);
  private readonly freeVersions: number[] = [];

  // The slot of a key, or -1.
  find(keyId: string): number {
    if (this.count === 0) return NONE;
    const hash = this.hash(keyId);
    const mask = this.buckets.length - 1;
    for (let b = hash & mask; this.buckets[b] !== 0; b = (b + 1) & mask) {
      const at = this.buckets[b]! - 1;
      if (this.ints[at * INTS + HASH] === hash && (this.ids.equals(at, keyId) || this.refs[at * REFS + ID] === keyId)) return at;
    }
    return NONE;
  }

  get size(): number {
    return this.count;
  }

  // The sum of the packed keys' weights (weightOf).
  get weight(): number {
    return this.totalWeight;
  }

  // The slot installed longest ago, or -1.
  get oldest(): number {
    return this.oldestSlot;
  }

  // Packs a built entry of a key not packed yet, as the newest; returns its slot.
  add(entry: CachedKey): number {
    if ((this.count + 1) * 2 > this.buckets.length) this.growBuckets();
    const at = this.freeKeys.pop() ?? this.growKeys();
    const r = entry.record;
    const i = at * INTS;
    if (!this.ids.set(at, r.id)) this.refs[at * REFS + ID] = r.id;
    this.setFields(at, r);
    // Linked from the last, so that the list runs in id order.
    let next = NONE;
    for (let k = entry.versionList.length - 1; k >= 0; k--) {
      const slot = this.freeVersions.pop() ?? this.growVersions();
      this.setVersion(slot, entry.versionList[k]!);
      this.vNext[slot] = next;
      if (next === NONE) this.ints[i + LAST_VERSION] = slot;
      next = slot;
    }
    if (next === NONE) this.ints[i + LAST_VERSION] = NONE;
    this.ints[i + FIRST_VERSION] = next;
    this.ints[i + HASH] = this.hash(r.id);
    this.index(at);
    this.linkNewest(at);
    this.count++;
    this.totalWeight += weightOf(r.description, r.labels, entry.versionList.length);
    return at;
  }

  // Changes the key at `at` in place to what `entry` holds of it: its record, and of its versions those in `changed`
  // (changed, or new: a new version's id is above every id the key holds); the other versions stay as they are, or lose
  // their material with `dropMaterial`. The key becomes the newest; handles to it stop working. `before`: the key as
  // the mutation read it from the store. False, changing nothing, when the entry is not of that key (it missed a change
  // another server made, not yet announced): the caller then removes it.
  patch(at: number, entry: CachedKey, changed: ReadonlySet<number>, dropMaterial: boolean, before: Readonly<CryptoKeyRecord>): boolean {
    const n = at * NUMBERS;
    if (this.numbers[n + NEXT_VERSION_ID] !== before.nextVersionId || orNull(this.numbers[n + PRIMARY]!) !== before.primaryVersionId) return false;
    const pending = new Map(entry.versionList.filter((v) => changed.has(v.id)).map((v) => [v.id, v]));
    let last = NONE;
    let lastId = 0;
    for (let slot = this.ints[at * INTS + FIRST_VERSION]!; slot !== NONE; slot = this.vNext[slot]!) {
      last = slot;
      lastId = this.vNumbers[slot * V_NUMBERS]!;
    }
    for (const id of pending.keys()) if (!this.holds(at, id) && id <= lastId) return false;
    const s = at * REFS;
    let versions = 0;
    for (let slot = this.ints[at * INTS + FIRST_VERSION]!; slot !== NONE; slot = this.vNext[slot]!) {
      versions++;
      const change = pending.get(this.vNumbers[slot * V_NUMBERS]!);
      if (change !== undefined) {
        this.setVersion(slot, change);
        pending.delete(change.id);
      } else if (dropMaterial) {
        this.material.fill(0, slot * MATERIAL_BYTES, (slot + 1) * MATERIAL_BYTES);
        this.vCodes[slot * V_CODES + 2] = 0;
      }
    }
    this.totalWeight -= weightOf(this.refs[s + DESCRIPTION] as string, this.refs[s + LABELS] as string[], versions);
    for (const v of [...pending.values()].sort((a, b) => a.id - b.id)) {
      const slot = this.freeVersions.pop() ?? this.growVersions();
      this.setVersion(slot, v);
      this.vNext[slot] = NONE;
      if (last === NONE) this.ints[at * INTS + FIRST_VERSION] = slot;
      else this.vNext[last] = slot;
      last = slot;
      versions++;
    }
    this.ints[at * INTS + LAST_VERSION] = last;
    this.setFields(at, entry.record);
    this.totalWeight += weightOf(entry.record.description, entry.record.labels, versions);
    this.ints[at * INTS + STAMP] = (this.ints[at * INTS + STAMP]! + 1) | 0;
    this.unlink(at);
    this.linkNewest(at);
    return true;
  }

  private holds(at: number, versionId: number): boolean {
    for (let slot = this.ints[at * INTS + FIRST_VERSION]!; slot !== NONE; slot = this.vNext[slot]!) {
      if (this.vNumbers[slot * V_NUMBERS] === versionId) return true;
    }
    return false;
  }

  // Everything of a key's record but its id.
  private setFields(at: number, r: Readonly<CryptoKeyRecord>): void {
    const n = at * NUMBERS;
    this.numbers[n + CREATED] = r.createdAt;
    this.numbers[n + GONE] = orNaN(r.goneAt);
    this.numbers[n + ROTATION_PERIOD] = orNaN(r.rotationPeriodMs);
    this.numbers[n + NEXT_ROTATION] = orNaN(r.nextRotationAt);
    this.numbers[n + PRIMARY] = orNaN(r.primaryVersionId);
    this.numbers[n + NEXT_VERSION_ID] = r.nextVersionId;
    this.defaultAlgorithms[at] = algorithms.indexOf(r.defaultAlgorithm);
    const s = at * REFS;
    this.refs[s + NAME] = this.names.set(at, r.name) ? undefined : r.name;
    this.refs[s + DESCRIPTION] = r.description;
    this.refs[s + PARENT] = r.parentId;
    this.refs[s + OWNER] = r.owner;
    this.refs[s + LABELS] = r.labels;
    this.refs[s + RECORD] = undefined;
  }

  // A version's fields and, when it serves, its material (else the slot's material is wiped).
  private setVersion(slot: number, v: EntryVersion): void {
    this.vNumbers[slot * V_NUMBERS] = v.id;
    this.vNumbers[slot * V_NUMBERS + 1] = v.createdAt;
    this.vNumbers[slot * V_NUMBERS + 2] = orNaN(v.destroyAt);
    this.vCodes[slot * V_CODES] = versionStates.indexOf(v.state);
    this.vCodes[slot * V_CODES + 1] = algorithms.indexOf(v.algorithm);
    const key = v.key;
    this.vCodes[slot * V_CODES + 2] = key === null ? 0 : 1;
    this.material.fill(0, slot * MATERIAL_BYTES, (slot + 1) * MATERIAL_BYTES);
    if (key !== null) this.material.set(key.material, slot * MATERIAL_BYTES);
  }

  private linkNewest(at: number): void {
    this.ints[at * INTS + OLDER] = this.newestSlot;
    this.ints[at * INTS + NEWER] = NONE;
    if (this.newestSlot === NONE) this.oldestSlot = at;
    else this.ints[this.newestSlot * INTS + NEWER] = at;
    this.newestSlot = at;
  }

  private unlink(at: number): void {
    const older = this.ints[at * INTS + OLDER]!;
    const newer = this.ints[at * INTS + NEWER]!;
    if (older === NONE) this.oldestSlot = newer;
    else this.ints[older * INTS + NEWER] = newer;
    if (newer === NONE) this.newestSlot = older;
    else this.ints[newer * INTS + OLDER] = older;
  }

  // Frees a slot and its versions' slots, the material zeroed; handles to it stop working.
  remove(at: number): void {
    this.unindex(at);
    this.unlink(at);
    this.count--;
    let versions = 0;
    for (let slot = this.ints[at * INTS + FIRST_VERSION]!; slot !== NONE; ) {
      const next = this.vNext[slot]!;
      this.material.fill(0, slot * MATERIAL_BYTES, (slot + 1) * MATERIAL_BYTES);
      this.vCodes[slot * V_CODES + 2] = 0;
      this.freeVersions.push(slot);
      slot = next;
      versions++;
    }
    const s = at * REFS;
    this.totalWeight -= weightOf(this.refs[s + DESCRIPTION] as string, this.refs[s + LABELS] as string[], versions);
    this.refs.fill(undefined, at * REFS, (at + 1) * REFS);
    this.ids.clear(at);
    this.names.clear(at);
    this.ints[at * INTS + STAMP] = (this.ints[at * INTS + STAMP]! + 1) | 0;
    this.freeKeys.push(at);
  }

  // A handle to the entry at `at`, for the turn it is read in.
  entry(keyId: string, at: number): PackedEntry {
    return new PackedEntry(this, keyId, at, this.ints[at * INTS + STAMP]!);
  }

  // Throws when the slot was freed since the handle was made (a handle kept past its turn).
  check(at: number, stamp: number): void {
    if (this.ints[at * INTS + STAMP] !== stamp) throw new Error("a key cache handle was used after its entry was evicted or replaced");
  }

  parentId(at: number): string {
    return this.refs[at * REFS + PARENT] as string;
  }

  goneAt(at: number): number | null {
    return orNull(this.numbers[at * NUMBERS + GONE]!);
  }

  primaryVersionId(at: number): number | null {
    return orNull(this.numbers[at * NUMBERS + PRIMARY]!);
  }

  // The key's record, built on the first read and kept with the entry.
  record(at: number, keyId: string): Readonly<CryptoKeyRecord> {
    const s = at * REFS;
    const known = this.refs[s + RECORD] as Readonly<CryptoKeyRecord> | undefined;
    if (known !== undefined) return known;
    const n = at * NUMBERS;
    const record: Readonly<CryptoKeyRecord> = Object.freeze({
      id: keyId,
      parentId: this.refs[s + PARENT] as string,
      name: this.names.get(at) ?? (this.refs[s + NAME] as string),
      description: this.refs[s + DESCRIPTION] as string,
      owner: this.refs[s + OWNER] as string,
      labels: this.refs[s + LABELS] as string[],
      rotationPeriodMs: orNull(this.numbers[n + ROTATION_PERIOD]!),
      nextRotationAt: orNull(this.numbers[n + NEXT_ROTATION]!),
      defaultAlgorithm: algorithms[this.defaultAlgorithms[at]!]!,
      primaryVersionId: this.primaryVersionId(at),
      nextVersionId: this.numbers[n + NEXT_VERSION_ID]!,
      createdAt: this.numbers[n + CREATED]!,
      goneAt: orNull(this.numbers[n + GONE]!),
    });
    this.refs[s + RECORD] = record;
    return record;
  }

  lastVersion(at: number): number {
    return this.ints[at * INTS + LAST_VERSION]!;
  }

  firstVersion(at: number): number {
    return this.ints[at * INTS + FIRST_VERSION]!;
  }

  nextVersion(slot: number): number {
    return this.vNext[slot]!;
  }

  versionId(slot: number): number {
    return this.vNumbers[slot * V_NUMBERS]!;
  }

  version(entry: PackedEntry, slot: number): PackedVersion {
    return new PackedVersion(
      entry,
      slot,
      this.vNumbers[slot * V_NUMBERS]!,
      versionStates[this.vCodes[slot * V_CODES]!]!,
      algorithms[this.vCodes[slot * V_CODES + 1]!]!,
      this.vNumbers[slot * V_NUMBERS + 1]!,
      orNull(this.vNumbers[slot * V_NUMBERS + 2]!),
      this.vCodes[slot * V_CODES + 2] === 1,
    );
  }

  // A view of a version's material, for the turn it is used in.
  materialOf(slot: number, length: number): Buffer {
    return this.material.subarray(slot * MATERIAL_BYTES, slot * MATERIAL_BYTES + length);
  }

  // Copies of the material of the versions `wanted` of the key at `at` that hold one, by version id.
  materialById(at: number, wanted: ReadonlySet<number>): Map<number, Buffer> {
    const out = new Map<number, Buffer>();
    for (let slot = this.ints[at * INTS + FIRST_VERSION]!; slot !== NONE; slot = this.vNext[slot]!) {
      if (this.vCodes[slot * V_CODES + 2] !== 1 || !wanted.has(this.vNumbers[slot * V_NUMBERS]!)) continue;
      const length = keyLengthBytes[algorithms[this.vCodes[slot * V_CODES + 1]!]!];
      out.set(this.vNumbers[slot * V_NUMBERS]!, Buffer.from(this.materialOf(slot, length)));
    }
    return out;
  }

  // FNV-1a over the UTF-16 code units, from the process's seed.
  private hash(keyId: string): number {
    let h = this.seed;
    for (let i = 0; i < keyId.length; i++) h = Math.imul(h ^ keyId.charCodeAt(i), 0x01000193);
    return h ^ (h >>> 15);
  }

  // Enters a slot into the table at the first free bucket from its hash on.
  private index(at: number): void {
    const mask = this.buckets.length - 1;
    let b = this.ints[at * INTS + HASH]! & mask;
    while (this.buckets[b] !== 0) b = (b + 1) & mask;
    this.buckets[b] = at + 1;
  }

  // Takes a slot out of the table, and moves back every key after it in the run that it no longer keeps from its
  // hash's bucket (linear probing's deletion, which leaves no tombstones to walk past).
  private unindex(at: number): void {
    const mask = this.buckets.length - 1;
    let hole = this.ints[at * INTS + HASH]! & mask;
    while (this.buckets[hole] !== at + 1) hole = (hole + 1) & mask;
    for (let b = (hole + 1) & mask; this.buckets[b] !== 0; b = (b + 1) & mask) {
      const home = this.ints[(this.buckets[b]! - 1) * INTS + HASH]! & mask;
      // A key may fill the hole unless its home bucket lies after the hole, up to where it sits (cyclically).
      const homeAfterHole = hole <= b ? home > hole && home <= b : home > hole || home <= b;
      if (!homeAfterHole) {
        this.buckets[hole] = this.buckets[b]!;
        hole = b;
      }
    }
    this.buckets[hole] = 0;
  }

  private growBuckets(): void {
    this.buckets = new Int32Array(Math.max(2 * FIRST_SLOTS, this.buckets.length * 2));
    for (let at = this.oldestSlot; at !== NONE; at = this.ints[at * INTS + NEWER]!) this.index(at);
  }

  private growKeys(): number {
    const first = this.keySlots;
    this.keySlots = Math.max(FIRST_SLOTS, first * 2);
    this.numbers = grown(this.numbers, this.keySlots * NUMBERS);
    this.ints = grown(this.ints, this.keySlots * INTS);
    this.defaultAlgorithms = grown(this.defaultAlgorithms, this.keySlots);
    this.ids.grow(this.keySlots);
    this.names.grow(this.keySlots);
    for (let i = first * REFS; i < this.keySlots * REFS; i++) this.refs.push(undefined);
    // Pushed so that the lowest slot is popped first.
    for (let at = this.keySlots - 1; at > first; at--) this.freeKeys.push(at);
    return first;
  }

  private growVersions(): number {
    const first = this.versionSlots;
    this.versionSlots = Math.max(FIRST_SLOTS, first * 2);
    this.vNumbers = grown(this.vNumbers, this.versionSlots * V_NUMBERS);
    this.vNext = grown(this.vNext, this.versionSlots);
    this.vCodes = grown(this.vCodes, this.versionSlots * V_CODES);
    // allocUnsafeSlow: a buffer of its own, never a slice of Node's shared pool; the old one is wiped once copied.
    const material = Buffer.allocUnsafeSlow(this.versionSlots * MATERIAL_BYTES).fill(0);
    this.material.copy(material);
    this.material.fill(0);
    this.material = material;
    for (let slot = this.versionSlots - 1; slot > first; slot--) this.freeVersions.push(slot);
    return first;
  }
}

// A cached key as one read sees it.
class PackedEntry implements KeyEntry {
  constructor(
    private readonly keys: PackedKeys,
    readonly id: string,
    private readonly at: number,
    private readonly stamp: number,
  ) {}

  // The keys, once the handle is known to be current.
  current(): PackedKeys {
    this.keys.check(this.at, this.stamp);
    return this.keys;
  }

  get parentId(): string {
    return this.current().parentId(this.at);
  }

  get goneAt(): number | null {
    return this.current().goneAt(this.at);
  }

  version(versionId: number): PackedVersion | undefined {
    const keys = this.current();
    const last = keys.lastVersion(this.at);
    if (last !== NONE && keys.versionId(last) === versionId) return keys.version(this, last);
    for (let slot = keys.firstVersion(this.at); slot !== NONE; slot = keys.nextVersion(slot)) {
      if (keys.versionId(slot) === versionId) return keys.version(this, slot);
    }
    return undefined;
  }

  get view(): KeyView {
    const keys = this.current();
    const primaryId = keys.primaryVersionId(this.at);
    return { key: keys.record(this.at, this.id), primary: primaryId === null ? null : (this.version(primaryId)?.info ?? null) };
  }

  infosPage(offset: number, limit: number): VersionInfo[] {
    const keys = this.current();
    const out: VersionInfo[] = [];
    let skipped = 0;
    for (let slot = keys.firstVersion(this.at); slot !== NONE && out.length < limit; slot = keys.nextVersion(slot)) {
      if (skipped < offset) skipped++;
      else out.push(keys.version(this, slot).info);
    }
    return out;
  }
}

// One version of a PackedEntry, its fields read when the handle was made; the material is read at use.
class PackedVersion implements EntryVersion, VersionKey {
  constructor(
    private readonly entry: PackedEntry,
    private readonly slot: number,
    readonly id: number,
    readonly state: VersionState,
    readonly algorithm: Algorithm,
    readonly createdAt: number,
    readonly destroyAt: number | null,
    private readonly usable: boolean,
  ) {}

  get keyId(): string {
    return this.entry.id;
  }

  get versionId(): number {
    return this.id;
  }

  get key(): VersionKey | null {
    return this.usable ? this : null;
  }

  get material(): Uint8Array {
    return this.entry.current().materialOf(this.slot, keyLengthBytes[this.algorithm]);
  }

  get info(): VersionInfo {
    const { keyId, id, state, algorithm, createdAt, destroyAt } = this;
    return Object.freeze({ keyId, id, state, algorithm, createdAt, destroyAt });
  }
}
