import type { VersionKey } from "./ciphertext.js";
import type { KeyView } from "./key-manager.js";
import type { MasterKey } from "./master-key.js";
import type { Algorithm, CryptoKeyRecord, VersionInfo, VersionState } from "./model.js";

// What the key manager reads of a key, whether from an entry the cache holds (packed-keys.ts) or from one just
// built from storage or from a mutation's outcome (CachedKey, below).
export interface KeyEntry {
  readonly id: string;
  // The namespace, for the access check of calls that name the key by id.
  readonly parentId: string;
  readonly goneAt: number | null;
  // GetCryptoKey, GetCryptoKeyVersion and ListCryptoKeyVersions answer from the entry.
  readonly view: KeyView;
  // The `limit` versions from `offset` on, in id order (the order ListCryptoKeyVersions pages in): a page made
  // without making the others.
  infosPage(offset: number, limit: number): VersionInfo[];
  version(versionId: number): EntryVersion | undefined;
}

export interface EntryVersion extends VersionInfo {
  // What Encrypt and Decrypt use, or null when the version is not ENABLED.
  readonly key: VersionKey | null;
  // What reads report: everything but the material, frozen.
  readonly info: VersionInfo;
}

// The material of a built entry's version as a call reads it: unwrapped into this one buffer at each read, and good
// until the next read of any version's material (seal and open read it once and hand it to OpenSSL at once).
const unwrapped = Buffer.allocUnsafeSlow(32);

// A version of a built entry. It keeps the wrapped material, only while ENABLED (so that a disabled or scheduled
// version offers no usable key), and unwraps it when read: a built entry serves the one call that built it, across
// awaits, and nothing in it needs freeing or wiping when that call is done. The material build() unwrapped to
// check the master key waits in `pending` until the cache has packed a copy, then is wiped (release()).
export class CachedVersion implements EntryVersion, VersionKey {
  constructor(
    readonly keyId: string,
    readonly id: number,
    readonly state: VersionState,
    readonly algorithm: Algorithm,
    readonly createdAt: number,
    readonly destroyAt: number | null,
    private readonly wrapped: Uint8Array | null,
    private readonly masterKey: MasterKey,
    private pending: Uint8Array | null,
  ) {}

  get key(): VersionKey | null {
    return this.wrapped === null ? null : this;
  }

  get versionId(): number {
    return this.id;
  }

  get material(): Uint8Array {
    if (this.pending !== null) return this.pending;
    const material = this.masterKey.unwrap(this.wrapped!, this.keyId, this.id);
    unwrapped.set(material);
    material.fill(0);
    return unwrapped.subarray(0, material.length);
  }

  release(): void {
    this.pending?.fill(0);
    this.pending = null;
  }

  get info(): VersionInfo {
    const { keyId, id, state, algorithm, createdAt, destroyAt } = this;
    return Object.freeze({ keyId, id, state, algorithm, createdAt, destroyAt });
  }
}

// An entry built from stored rows (a cache miss) or from what a mutation is about to commit. The cache keeps a
// packed copy of it; the call that built it goes on with this one, which stays valid however long the call runs.
export class CachedKey implements KeyEntry {
  constructor(
    // The key's metadata, frozen.
    readonly record: Readonly<CryptoKeyRecord>,
    readonly versionList: readonly CachedVersion[],
  ) {}

  get id(): string {
    return this.record.id;
  }

  get parentId(): string {
    return this.record.parentId;
  }

  get goneAt(): number | null {
    return this.record.goneAt;
  }

  version(versionId: number): CachedVersion | undefined {
    for (const v of this.versionList) if (v.id === versionId) return v;
    return undefined;
  }

  get view(): KeyView {
    const primaryId = this.record.primaryVersionId;
    return { key: this.record, primary: primaryId === null ? null : (this.version(primaryId)?.info ?? null) };
  }

  infosPage(offset: number, limit: number): VersionInfo[] {
    return this.versionList.slice(offset, offset + limit).map((v) => v.info);
  }

  // Wipes the material build() unwrapped, once the cache has packed its copy (or declined to).
  release(): void {
    for (const v of this.versionList) v.release();
  }
}
