import { createSecretKey } from "node:crypto";
import { versionKey } from "./ciphertext.js";
import type { VersionKey } from "./ciphertext.js";
import type { MasterKey } from "./master-key.js";
import type { Algorithm, KeyAggregate, VersionState } from "./model.js";

export interface CachedVersion {
  readonly id: number;
  readonly state: VersionState;
  readonly algorithm: Algorithm;
  readonly destroyAt: number | null;
  // Unwrapped material, present only while the version is ENABLED: a disabled or scheduled version keeps no
  // usable key in memory.
  readonly key: VersionKey | null;
}

export interface CachedKey {
  readonly id: string;
  // The namespace, for the access check of calls that name the key by id.
  readonly parentId: string;
  readonly goneAt: number | null;
  readonly versions: ReadonlyMap<number, CachedVersion>;
}

// What Encrypt and Decrypt read instead of storage. Every mutation of a key replaces its entry with the state
// it just committed, so a disabled version stops working on the very next call. Bounded: the oldest entry
// goes first and is reloaded from storage when needed again.
//
// Building an entry and installing it are two steps because only building can fail (the master key may not
// unwrap the stored material): a mutation builds the entry of its outcome inside the store's transaction, so
// that failure aborts the write, and installs it only once the write has committed.
export class KeyCache {
  private readonly entries = new Map<string, CachedKey>();

  constructor(
    private readonly masterKey: MasterKey,
    private readonly maxEntries: number,
  ) {}

  get(keyId: string): CachedKey | undefined {
    return this.entries.get(keyId);
  }

  // Unwraps the material of every ENABLED version; throws when the master key cannot. Changes nothing.
  build(aggregate: KeyAggregate): CachedKey {
    const versions = new Map<number, CachedVersion>();
    const idBytes = Buffer.from(aggregate.key.id);
    for (const v of aggregate.versions) {
      let key: VersionKey | null = null;
      if (v.state === "ENABLED" && v.wrappedMaterial !== null) {
        const material = this.masterKey.unwrap(v.wrappedMaterial, v.keyId, v.id);
        key = versionKey(v.algorithm, createSecretKey(material), idBytes, v.id);
        material.fill(0);
      }
      versions.set(v.id, { id: v.id, state: v.state, algorithm: v.algorithm, destroyAt: v.destroyAt, key });
    }
    return { id: aggregate.key.id, parentId: aggregate.key.parentId, goneAt: aggregate.key.goneAt, versions };
  }

  // Replaces the key's entry; never fails.
  install(entry: CachedKey): CachedKey {
    this.entries.delete(entry.id);
    this.entries.set(entry.id, entry);
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    return entry;
  }
}

// The state to report for a cached version: a scheduled version whose time has come is DESTROYED.
export function cachedState(version: CachedVersion, now: number): VersionState {
  return version.state === "DESTROYED_SCHEDULED" && version.destroyAt !== null && version.destroyAt <= now
    ? "DESTROYED"
    : version.state;
}
