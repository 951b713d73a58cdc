import { CachedKey, CachedVersion } from "./cached-key.js";
import type { KeyEntry } from "./cached-key.js";
import type { MasterKey } from "./master-key.js";
import { destructionPending } from "./model.js";
import type { KeyAggregate } from "./model.js";
import { PackedKeys } from "./packed-keys.js";

// Most keys have no labels: they share one frozen empty list.
const NO_LABELS = Object.freeze([]) as unknown as string[];

// What Encrypt and Decrypt read instead of storage, and the key reads too. Every mutation of a key made in this
// process replaces its entry with the state it just committed, so a disabled version stops working, and a read
// sees the change, on the very next call. A write another server makes to a shared store evicts the entry when
// the store announces it (evict), and while the store cannot vouch that every change has been announced the cache
// serves nothing (trust(false); docs/storage.md gives the bound). Bounded: the oldest entry goes first and is
// reloaded from storage when needed again. Entries are held packed (packed-keys.ts); a hit returns a handle for the
// caller's synchronous turn, and a call that goes on across an await uses the entry it built itself.
//
// Building an entry and installing it are two steps because only building can fail (the master key may not
// unwrap the stored material): a mutation builds the entry of its outcome inside the store's transaction, so
// that failure aborts the write, and installs it only once the write has committed.
export class KeyCache {
  private readonly packed = new PackedKeys();
  // Counts installed commits and evictions, so that an entry loaded from storage before one of them is not
  // installed over it (installLoaded).
  private commits = 0;
  // Lookups answered from memory and lookups that had to go to storage, for /metrics.
  hits = 0;
  misses = 0;
  private trusted = true;
  // Namespaces, owners and labels repeat across keys, but every row read from storage brings new strings: entries
  // share one copy of each. Bounded: a store with more distinct values than this just shares less.
  private readonly strings = new Map<string, string>();
  // Lists of labels, shared the same way.
  private readonly labelLists = new Map<string, string[]>();

  constructor(
    private readonly masterKey: MasterKey,
    private readonly maxEntries: number,
  ) {}

  // A handle valid for the caller's synchronous turn.
  get(keyId: string): KeyEntry | undefined {
    const at = this.packed.find(keyId);
    if (at === -1) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    return this.packed.entry(keyId, at);
  }

  // Another server changed the key.
  evict(keyId: string): void {
    this.commits++;
    this.remove(keyId);
  }

  // Whether entries may be kept and served. Either way what is cached now goes: on distrust because it may be
  // stale, on trust again because changes may have gone unannounced meanwhile.
  trust(trusted: boolean): void {
    this.trusted = trusted;
    this.commits++;
    while (this.packed.oldest !== -1) this.packed.remove(this.packed.oldest);
  }

  // Read before loading a key from storage, and handed to installLoaded.
  get generation(): number {
    return this.commits;
  }

  // Unwraps the material of every ENABLED version; throws when the master key cannot. Changes nothing. Without
  // `unwrap`, no material is unwrapped and every key is null: an entry for metadata only, never installed. A key
  // whose destruction is pending keeps no material at all, so that no version of it serves Encrypt or Decrypt.
  build(aggregate: KeyAggregate, unwrap = true): CachedKey {
    const serving = unwrap && !destructionPending(aggregate.key, aggregate.versions);
    // A version's material never changes while it has one, so what the entry being replaced holds is copied instead
    // of unwrapped again: a change to a key of 2,000 versions unwrapped every one of them, 3-4 ms of the 18 that
    // one change took (docs/performance.md). Versions new to the entry are unwrapped, which is the check that the
    // master key opens what a mutation is about to commit.
    const known = serving ? this.packedMaterial(aggregate.key.id) : undefined;
    const versions = aggregate.versions.map((v) => {
      const usable = serving && v.state === "ENABLED" && v.wrappedMaterial !== null;
      let material: Uint8Array | null = null;
      if (usable) {
        material = known?.get(v.id) ?? this.masterKey.unwrap(v.wrappedMaterial!, v.keyId, v.id);
        known?.delete(v.id);
      }
      return new CachedVersion(
        aggregate.key.id,
        v.id,
        v.state,
        v.algorithm,
        v.createdAt,
        v.destroyAt,
        usable ? v.wrappedMaterial : null,
        this.masterKey,
        material,
      );
    });
    // Copies of versions that no longer serve.
    if (known !== undefined) for (const material of known.values()) material.fill(0);
    const k = aggregate.key;
    const record = Object.freeze({
      id: k.id,
      parentId: this.shared(k.parentId),
      name: k.name,
      description: k.description,
      owner: this.shared(k.owner),
      labels: this.sharedLabels(k.labels),
      rotationPeriodMs: k.rotationPeriodMs,
      nextRotationAt: k.nextRotationAt,
      defaultAlgorithm: k.defaultAlgorithm,
      primaryVersionId: k.primaryVersionId,
      nextVersionId: k.nextVersionId,
      createdAt: k.createdAt,
      goneAt: k.goneAt,
    });
    return new CachedKey(record, versions);
  }

  // Copies of the material the cached entry of a key holds, by version id; undefined when none is cached.
  private packedMaterial(keyId: string): Map<number, Buffer> | undefined {
    const at = this.packed.find(keyId);
    return at === -1 ? undefined : this.packed.materialById(at);
  }

  private shared(value: string): string {
    const known = this.strings.get(value);
    if (known !== undefined) return known;
    if (this.strings.size >= 4096) this.strings.clear();
    this.strings.set(value, value);
    return value;
  }

  private sharedLabels(labels: string[]): string[] {
    if (labels.length === 0) return NO_LABELS;
    // Each label after its length, so that no two lists join alike.
    const joined = labels.map((l) => `${l.length}:${l}`).join("");
    const known = this.labelLists.get(joined);
    if (known !== undefined) return known;
    const list = Object.freeze(labels.map((l) => this.shared(l))) as string[];
    if (this.labelLists.size >= 4096) this.labelLists.clear();
    this.labelLists.set(joined, list);
    return list;
  }

  // Installs what a mutation just committed; never fails.
  install(entry: CachedKey): CachedKey {
    this.commits++;
    this.set(entry);
    entry.release();
    return entry;
  }

  // Installs what a read loaded from storage, unless a commit was installed since `generation` was read: what
  // the read saw may then be older than the entry of that commit. Never fails.
  installLoaded(entry: CachedKey, generation: number): CachedKey {
    if (generation === this.commits) this.set(entry);
    entry.release();
    return entry;
  }

  private set(entry: CachedKey): void {
    if (!this.trusted) return;
    this.remove(entry.id);
    this.packed.add(entry);
    // By weight (packed-keys.ts): a key holding much text or many versions counts for more than one.
    while (this.packed.weight > this.maxEntries && this.packed.oldest !== -1) this.packed.remove(this.packed.oldest);
  }

  private remove(keyId: string): void {
    const at = this.packed.find(keyId);
    if (at !== -1) this.packed.remove(at);
  }
}
