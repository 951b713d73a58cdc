import type { EntryVersion, CachedKey, KeyEntry } from "./cached-key.js";
import type { VersionKey } from "./ciphertext.js";
import type { KeyView } from "./key-manager.js";
import { algorithms, keyLengthBytes, versionStates } from "./model.js";
import type { Algorithm, CryptoKeyRecord, VersionInfo, VersionState } from "./model.js";

// The entries the key cache holds, packed: numbers in typed arrays, strings in one array, the unwrapped material
// of ENABLED versions in one buffer, each key and each version at a slot reused once its entry goes. A cache of
// objects (one per key, one per version, a frozen record) cost 527 bytes of heap a key: with 100,000 keys cached
// the heap held 53 MB of entries, and V8 lets the old generation grow to several times what it holds before it
// collects, so a sweep over more keys than the cache holds took the process from 183 to 482 MiB RSS
// (docs/performance.md). Packed, a key costs the heap its id (the map's key), its name and its row of the string
// array, and an evicted key leaves two strings behind instead of a dozen objects.
//
// A read gets a handle (PackedEntry) that is valid until its entry is evicted or replaced: the key manager uses
// a handle only in the synchronous turn it got it in, and every read through a handle checks the slot's stamp,
// which changes when the slot is freed, so that a handle kept too long fails loudly instead of reading another
// key. The record that key reads return is built on the first read and kept with the entry, so that its frozen
// CryptoKey message (kms-service.ts) is shared while the entry lives.

const NONE = -1;
const MATERIAL_BYTES = 32;
const FIRST_SLOTS = 1024;

// Per key. Times: createdAt, goneAt, rotationPeriodMs, nextRotationAt (NaN for null).
const TIMES = 4;
// Ints: primaryVersionId (0 for none: version ids start at 1), nextVersionId, first version slot, stamp.
const INTS = 4;
const PRIMARY = 0;
const NEXT_VERSION_ID = 1;
const FIRST_VERSION = 2;
const STAMP = 3;
// Strings and objects: name, description, parentId, owner, labels, the record once built.
const REFS = 6;
const NAME = 0;
const DESCRIPTION = 1;
const PARENT = 2;
const OWNER = 3;
const LABELS = 4;
const RECORD = 5;

// Per version. Ints: id, the next version's slot (versions are linked in id order). Times: createdAt, destroyAt.
// Codes: state, algorithm, whether the material is there (ENABLED only).
const V_INTS = 2;
const V_TIMES = 2;
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

export class PackedKeys {
  private keySlots = 0;
  private times = new Float64Array(0);
  private ints = new Int32Array(0);
  private defaultAlgorithms = new Uint8Array(0);
  private refs: unknown[] = [];
  private readonly freeKeys: number[] = [];

  private versionSlots = 0;
  private vInts = new Int32Array(0);
  private vTimes = new Float64Array(0);
  private vCodes = new Uint8Array(0);
  private material = Buffer.alloc(0);
  private readonly freeVersions: number[] = [];

  // Packs a built entry; returns its slot.
  add(entry: CachedKey): number {
    const at = this.freeKeys.pop() ?? this.growKeys();
    const r = entry.record;
    const t = at * TIMES;
    this.times[t] = r.createdAt;
    this.times[t + 1] = orNaN(r.goneAt);
    this.times[t + 2] = orNaN(r.rotationPeriodMs);
    this.times[t + 3] = orNaN(r.nextRotationAt);
    const i = at * INTS;
    this.ints[i + PRIMARY] = r.primaryVersionId ?? 0;
    this.ints[i + NEXT_VERSION_ID] = r.nextVersionId;
    this.defaultAlgorithms[at] = algorithms.indexOf(r.defaultAlgorithm);
    const s = at * REFS;
    this.refs[s + NAME] = r.name;
    this.refs[s + DESCRIPTION] = r.description;
    this.refs[s + PARENT] = r.parentId;
    this.refs[s + OWNER] = r.owner;
    this.refs[s + LABELS] = r.labels;
    this.refs[s + RECORD] = undefined;
    // Linked from the last, so that the list runs in id order.
    let next = NONE;
    for (let k = entry.versionList.length - 1; k >= 0; k--) {
      const v = entry.versionList[k]!;
      const slot = this.freeVersions.pop() ?? this.growVersions();
      this.vInts[slot * V_INTS] = v.id;
      this.vInts[slot * V_INTS + 1] = next;
      this.vTimes[slot * V_TIMES] = v.createdAt;
      this.vTimes[slot * V_TIMES + 1] = orNaN(v.destroyAt);
      this.vCodes[slot * V_CODES] = versionStates.indexOf(v.state);
      this.vCodes[slot * V_CODES + 1] = algorithms.indexOf(v.algorithm);
      const key = v.key;
      this.vCodes[slot * V_CODES + 2] = key === null ? 0 : 1;
      if (key !== null) this.material.set(key.material, slot * MATERIAL_BYTES);
      next = slot;
    }
    this.ints[i + FIRST_VERSION] = next;
    return at;
  }

  // Frees a slot and its versions' slots, the material zeroed; handles to it stop working.
  remove(at: number): void {
    for (let slot = this.ints[at * INTS + FIRST_VERSION]!; slot !== NONE; ) {
      const next = this.vInts[slot * V_INTS + 1]!;
      this.material.fill(0, slot * MATERIAL_BYTES, (slot + 1) * MATERIAL_BYTES);
      this.vCodes[slot * V_CODES + 2] = 0;
      this.freeVersions.push(slot);
      slot = next;
    }
    this.refs.fill(undefined, at * REFS, (at + 1) * REFS);
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
    return orNull(this.times[at * TIMES + 1]!);
  }

  primaryVersionId(at: number): number | null {
    const id = this.ints[at * INTS + PRIMARY]!;
    return id === 0 ? null : id;
  }

  // The key's record, built on the first read and kept with the entry.
  record(at: number, keyId: string): Readonly<CryptoKeyRecord> {
    const s = at * REFS;
    const known = this.refs[s + RECORD] as Readonly<CryptoKeyRecord> | undefined;
    if (known !== undefined) return known;
    const t = at * TIMES;
    const record: Readonly<CryptoKeyRecord> = Object.freeze({
      id: keyId,
      parentId: this.refs[s + PARENT] as string,
      name: this.refs[s + NAME] as string,
      description: this.refs[s + DESCRIPTION] as string,
      owner: this.refs[s + OWNER] as string,
      labels: this.refs[s + LABELS] as string[],
      rotationPeriodMs: orNull(this.times[t + 2]!),
      nextRotationAt: orNull(this.times[t + 3]!),
      defaultAlgorithm: algorithms[this.defaultAlgorithms[at]!]!,
      primaryVersionId: this.primaryVersionId(at),
      nextVersionId: this.ints[at * INTS + NEXT_VERSION_ID]!,
      createdAt: this.times[t]!,
      goneAt: orNull(this.times[t + 1]!),
    });
    this.refs[s + RECORD] = record;
    return record;
  }

  firstVersion(at: number): number {
    return this.ints[at * INTS + FIRST_VERSION]!;
  }

  nextVersion(slot: number): number {
    return this.vInts[slot * V_INTS + 1]!;
  }

  versionId(slot: number): number {
    return this.vInts[slot * V_INTS]!;
  }

  version(entry: PackedEntry, slot: number): PackedVersion {
    return new PackedVersion(
      entry,
      slot,
      this.vInts[slot * V_INTS]!,
      versionStates[this.vCodes[slot * V_CODES]!]!,
      algorithms[this.vCodes[slot * V_CODES + 1]!]!,
      this.vTimes[slot * V_TIMES]!,
      orNull(this.vTimes[slot * V_TIMES + 1]!),
      this.vCodes[slot * V_CODES + 2] === 1,
    );
  }

  // A view of a version's material, for the turn it is used in.
  materialOf(slot: number, length: number): Buffer {
    return this.material.subarray(slot * MATERIAL_BYTES, slot * MATERIAL_BYTES + length);
  }

  private growKeys(): number {
    const first = this.keySlots;
    this.keySlots = Math.max(FIRST_SLOTS, first * 2);
    this.times = grown(this.times, this.keySlots * TIMES);
    this.ints = grown(this.ints, this.keySlots * INTS);
    this.defaultAlgorithms = grown(this.defaultAlgorithms, this.keySlots);
    for (let i = first * REFS; i < this.keySlots * REFS; i++) this.refs.push(undefined);
    // Pushed so that the lowest slot is popped first.
    for (let at = this.keySlots - 1; at > first; at--) this.freeKeys.push(at);
    return first;
  }

  private growVersions(): number {
    const first = this.versionSlots;
    this.versionSlots = Math.max(FIRST_SLOTS, first * 2);
    this.vInts = grown(this.vInts, this.versionSlots * V_INTS);
    this.vTimes = grown(this.vTimes, this.versionSlots * V_TIMES);
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

  get infos(): VersionInfo[] {
    const keys = this.current();
    const out: VersionInfo[] = [];
    for (let slot = keys.firstVersion(this.at); slot !== NONE; slot = keys.nextVersion(slot)) out.push(keys.version(this, slot).info);
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
