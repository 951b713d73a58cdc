import type { VersionKey } from "./ciphertext.js";
import type { MasterKey } from "./master-key.js";
import type { KeyView } from "./key-manager.js";
import { MaterialSlabs } from "./material-slabs.js";
import { algorithms, keyLengthBytes, versionStates } from "./model.js";
import type { Algorithm, CryptoKeyRecord, KeyAggregate, VersionInfo, VersionState } from "./model.js";

// A cache may hold a hundred thousand keys or more, so an entry keeps one object per key and one per version, and
// the unwrapped material of its ENABLED versions in the cache's shared slabs; what reads return (the key's view,
// version infos) is built per call from them. docs/performance.md has the measured bytes per key.
export class CachedVersion implements VersionInfo, VersionKey {
  private readonly slot: number;

  constructor(
    readonly keyId: string,
    readonly id: number,
    readonly state: VersionState,
    readonly algorithm: Algorithm,
    readonly createdAt: number,
    readonly destroyAt: number | null,
    // Where the version's unwrapped material is: given only while the version is ENABLED, so that a disabled or
    // scheduled version keeps no usable key in memory. The slot is this object's until it is collected.
    private readonly slabs: MaterialSlabs | null,
    material: Uint8Array | null,
  ) {
    this.slot = slabs === null || material === null ? -1 : slabs.store(this, material);
  }

  // What Encrypt and Decrypt use, or null when the version is not ENABLED: the version itself, so that a call
  // holding it holds its slot.
  get key(): VersionKey | null {
    return this.slot === -1 ? null : this;
  }

  get versionId(): number {
    return this.id;
  }

  // A view of the material, taken per call (valid while this version is reachable).
  get material(): Uint8Array {
    return this.slabs!.view(this.slot, keyLengthBytes[this.algorithm]);
  }

  // What reads report: everything but the material; frozen, as the entry's record is.
  get info(): VersionInfo {
    const { keyId, id, state, algorithm, createdAt, destroyAt } = this;
    return Object.freeze({ keyId, id, state, algorithm, createdAt, destroyAt });
  }
}

export class CachedKey {
  constructor(
    // The key's metadata as the store holds it after its last committed mutation, frozen.
    readonly record: Readonly<CryptoKeyRecord>,
    // Every version, in id order (the order ListCryptoKeyVersions pages in).
    readonly versionList: readonly CachedVersion[],
  ) {}

  get id(): string {
    return this.record.id;
  }

  // The namespace, for the access check of calls that name the key by id.
  get parentId(): string {
    return this.record.parentId;
  }

  get goneAt(): number | null {
    return this.record.goneAt;
  }

  version(versionId: number): CachedVersion | undefined {
    // Keys have a handful of versions; a scan of an array costs less memory than a map and no more time.
    for (const v of this.versionList) if (v.id === versionId) return v;
    return undefined;
  }

  // GetCryptoKey, GetCryptoKeyVersion and ListCryptoKeyVersions answer from the entry.
  get view(): KeyView {
    const primaryId = this.record.primaryVersionId;
    return { key: this.record, primary: primaryId === null ? null : (this.version(primaryId)?.info ?? null) };
  }

  get infos(): VersionInfo[] {
    return this.versionList.map((v) => v.info);
  }
}

// Most keys have no labels: they share one frozen empty list.
const NO_LABELS = Object.freeze([]) as unknown as string[];

// Strings read from storage are new strings for every row; the enumerations are kept as the one constant each.
function interned<T extends string>(values: readonly T[], value: T): T {
  return values.find((v) => v === value) ?? value;
}

// What Encrypt and Decrypt read instead of storage, and the key reads too. Every mutation of a key made in this
// process replaces its entry with the state it just committed, so a disabled version stops working, and a read
// sees the change, on the very next call. A write another server makes to a shared store evicts the entry when
// the store announces it (evict), and while the store cannot vouch that every change has been announced the cache
// serves nothing (trust(false); docs/storage.md gives the bound). Bounded: the oldest entry goes first and is
// reloaded from storage when needed again.
//
// Building an entry and installing it are two steps because only building can fail (the master key may not
// unwrap the stored material): a mutation builds the entry of its outcome inside the store's transaction, so
// that failure aborts the write, and installs it only once the write has committed.
export class KeyCache {
  private readonly entries = new Map<string, CachedKey>();
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
  private readonly slabs = new MaterialSlabs();

  constructor(
    private readonly masterKey: MasterKey,
    private readonly maxEntries: number,
  ) {}

  get(keyId: string): CachedKey | undefined {
    const entry = this.entries.get(keyId);
    if (entry === undefined) this.misses++;
    else this.hits++;
    return entry;
  }

  // Another server changed the key.
  evict(keyId: string): void {
    this.commits++;
    this.entries.delete(keyId);
  }

  // Whether entries may be kept and served. Either way what is cached now goes: on distrust because it may be
  // stale, on trust again because changes may have gone unannounced meanwhile.
  trust(trusted: boolean): void {
    this.trusted = trusted;
    this.commits++;
    this.entries.clear();
  }

  // Read before loading a key from storage, and handed to installLoaded.
  get generation(): number {
    return this.commits;
  }

  // Unwraps the material of every ENABLED version; throws when the master key cannot. Changes nothing. Without
  // `unwrap`, no material is unwrapped and every key is null: an entry for metadata only, never installed.
  build(aggregate: KeyAggregate, unwrap = true): CachedKey {
    const usable = aggregate.versions.filter((v) => unwrap && v.state === "ENABLED" && v.wrappedMaterial !== null);
    // Every unwrap first: only they can fail, and a failure then leaves no slot taken.
    const materials = usable.map((v) => this.masterKey.unwrap(v.wrappedMaterial!, v.keyId, v.id));
    const versions = aggregate.versions.map((v) => {
      const at = usable.indexOf(v);
      return new CachedVersion(
        aggregate.key.id,
        v.id,
        interned(versionStates, v.state),
        interned(algorithms, v.algorithm),
        v.createdAt,
        v.destroyAt,
        at === -1 ? null : this.slabs,
        at === -1 ? null : materials[at]!,
      );
    });
    for (const m of materials) m.fill(0);
    const k = aggregate.key;
    const record = Object.freeze({
      id: k.id,
      parentId: this.shared(k.parentId),
      name: k.name,
      description: k.description,
      owner: this.shared(k.owner),
      labels: k.labels.length === 0 ? NO_LABELS : (Object.freeze(k.labels.map((l) => this.shared(l))) as string[]),
      rotationPeriodMs: k.rotationPeriodMs,
      nextRotationAt: k.nextRotationAt,
      defaultAlgorithm: interned(algorithms, k.defaultAlgorithm),
      primaryVersionId: k.primaryVersionId,
      nextVersionId: k.nextVersionId,
      createdAt: k.createdAt,
      goneAt: k.goneAt,
    });
    return new CachedKey(record, versions);
  }

  private shared(value: string): string {
    const known = this.strings.get(value);
    if (known !== undefined) return known;
    if (this.strings.size >= 4096) this.strings.clear();
    this.strings.set(value, value);
    return value;
  }

  // Installs what a mutation just committed; never fails.
  install(entry: CachedKey): CachedKey {
    this.commits++;
    this.set(entry);
    return entry;
  }

  // Installs what a read loaded from storage, unless a commit was installed since `generation` was read: what
  // the read saw may then be older than the entry of that commit. Never fails.
  installLoaded(entry: CachedKey, generation: number): CachedKey {
    if (generation === this.commits) this.set(entry);
    return entry;
  }

  private set(entry: CachedKey): void {
    if (!this.trusted) return;
    this.entries.delete(entry.id);
    this.entries.set(entry.id, entry);
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
  }
}
