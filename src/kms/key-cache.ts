import { createSecretKey } from "node:crypto";
import { versionKey } from "./ciphertext.js";
import type { VersionKey } from "./ciphertext.js";
import type { MasterKey } from "./master-key.js";
import type { KeyView } from "./key-manager.js";
import type { KeyAggregate, VersionInfo } from "./model.js";

export interface CachedVersion {
  // What the store holds about the version, less its wrapped material; frozen, as every read shares it.
  readonly info: VersionInfo;
  // Unwrapped material, present only while the version is ENABLED: a disabled or scheduled version keeps no
  // usable key in memory.
  readonly key: VersionKey | null;
}

export interface CachedKey {
  readonly id: string;
  // The namespace, for the access check of calls that name the key by id.
  readonly parentId: string;
  readonly goneAt: number | null;
  // Every version, in id order (the order ListCryptoKeyVersions pages in).
  readonly versions: ReadonlyMap<number, CachedVersion>;
  readonly infos: readonly VersionInfo[];
  // The key's metadata as the store holds it after its last committed mutation, frozen: GetCryptoKey,
  // GetCryptoKeyVersion and ListCryptoKeyVersions answer from the entry, and their answers share it.
  readonly view: KeyView;
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
    const versions = new Map<number, CachedVersion>();
    const infos: VersionInfo[] = [];
    const idBytes = Buffer.from(aggregate.key.id);
    for (const v of aggregate.versions) {
      let key: VersionKey | null = null;
      if (unwrap && v.state === "ENABLED" && v.wrappedMaterial !== null) {
        const material = this.masterKey.unwrap(v.wrappedMaterial, v.keyId, v.id);
        key = versionKey(v.algorithm, createSecretKey(material), idBytes, v.id);
        material.fill(0);
      }
      const info: VersionInfo = Object.freeze({
        keyId: v.keyId,
        id: v.id,
        state: v.state,
        algorithm: v.algorithm,
        createdAt: v.createdAt,
        destroyAt: v.destroyAt,
      });
      infos.push(info);
      versions.set(v.id, { info, key });
    }
    const record = Object.freeze({ ...aggregate.key, labels: Object.freeze([...aggregate.key.labels]) as string[] });
    const primary = record.primaryVersionId === null ? null : (versions.get(record.primaryVersionId)?.info ?? null);
    return {
      id: record.id,
      parentId: record.parentId,
      goneAt: record.goneAt,
      versions,
      infos: Object.freeze(infos),
      view: Object.freeze({ key: record, primary }),
    };
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
