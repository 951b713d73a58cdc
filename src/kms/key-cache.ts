import { CachedKey, CachedVersion } from "./cached-key.js";
import type { KeyEntry } from "./cached-key.js";
import type { MasterKey } from "./master-key.js";
import type { KeyView } from "./key-manager.js";
import { destructionPending, mergeVersions } from "./model.js";
import type { CryptoKeyRecord, CryptoKeyVersionRecord, KeyAggregate, KeyState } from "./model.js";
import { PackedKeys } from "./packed-keys.js";

// What a mutation's outcome does to the cache: made inside the store's transaction (prepare), where building it can
// fail (the master key may not open a version that starts serving) and so abort the write, and applied once the
// write has committed (apply).
export type CacheChange =
  // The key's entry as built from every version.
  | { readonly whole: true; readonly entry: CachedKey }
  // An entry of the versions the mutation read, of which those in `changed` are patched into the cached entry.
  | {
      readonly whole: false;
      readonly entry: CachedKey;
      readonly changed: ReadonlySet<number>;
      // The key as the mutation read it.
      readonly before: Readonly<CryptoKeyRecord>;
      readonly servedBefore: boolean;
      readonly serving: boolean;
    };

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
    const serves = (v: CryptoKeyVersionRecord) => serving && v.state === "ENABLED" && v.wrappedMaterial !== null;
    const known = serving ? this.packedMaterial(aggregate.key.id, new Set(aggregate.versions.filter(serves).map((v) => v.id))) : undefined;
    const versions = aggregate.versions.map((v) => {
      const usable = serves(v);
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

  // Copies of the material the cached entry of a key holds for the versions `wanted`, by version id; undefined when
  // the key is not cached.
  private packedMaterial(keyId: string, wanted: ReadonlySet<number>): Map<number, Buffer> | undefined {
    const at = this.packed.find(keyId);
    return at === -1 ? undefined : this.packed.materialById(at, wanted);
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

  // The change a mutation makes: `current` as the store read it, `outcome` the key and the versions it writes.
  prepare(current: KeyState, outcome: { key: KeyAggregate["key"]; versions: CryptoKeyVersionRecord[] }): CacheChange {
    const entry = this.build({ key: outcome.key, versions: mergeVersions(current.versions, outcome.versions) });
    if (current.complete) return { whole: true, entry };
    return {
      whole: false,
      entry,
      changed: new Set(outcome.versions.map((v) => v.id)),
      before: current.key,
      servedBefore: !destructionPending(current.key, current.versions),
      serving: !destructionPending(outcome.key, entry.versionList),
    };
  }

  // Applies what a mutation just committed, and answers the key's view as it left it; never fails. A change of some
  // versions is patched into the cached entry, if there is one (none: the key is read whole when next needed), so
  // that it costs what it changes, not what the key holds. The entry goes instead when the key serves again after a
  // pending destruction (every ENABLED version then serves, and the entry holds no material), and when it is not of
  // the key the mutation read (another server changed the key, and the store has not announced it yet).
  // `install` false: the store cannot vouch that this is the key's latest state (KmsStore.commitsInOrder); the key's
  // entry is evicted, and a read in flight is not installed either.
  apply(change: CacheChange, install: boolean): KeyView {
    const { entry } = change;
    if (!install) {
      this.evict(entry.id);
      entry.release();
      return entry.view;
    }
    if (change.whole) return this.install(entry).view;
    this.commits++;
    const at = this.packed.find(entry.id);
    if (at !== -1) {
      if ((change.serving && !change.servedBefore) || !this.packed.patch(at, entry, change.changed, !change.serving, change.before)) this.packed.remove(at);
      this.shrink();
    }
    entry.release();
    return entry.view;
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
    this.shrink();
  }

  // By weight (packed-keys.ts): a key holding much text or many versions counts for more than one.
  private shrink(): void {
    while (this.packed.weight > this.maxEntries && this.packed.oldest !== -1) this.packed.remove(this.packed.oldest);
  }

  private remove(keyId: string): void {
    const at = this.packed.find(keyId);
    if (at !== -1) this.packed.remove(at);
  }
}
