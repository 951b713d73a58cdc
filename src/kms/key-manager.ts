import { randomBytes } from "node:crypto";
import { DomainError, failedPrecondition, invalidArgument, notFound } from "../errors/domain-error.js";
import type { Clock } from "../shared/clock.js";
import type { KeyMutation, KeyPage, KmsStore } from "../storage/kms-store.js";
import { ciphertextVersion, open, seal } from "./ciphertext.js";
import type { VersionKey } from "./ciphertext.js";
import type { CachedKey, KeyEntry } from "./cached-key.js";
import type { KeyCache } from "./key-cache.js";
import type { MasterKey } from "./master-key.js";
import { computeGoneAt, destructionPending, effectiveState, isGone, keyLengthBytes, mergeVersions, rotationAfter } from "./model.js";
import type { Algorithm, CryptoKeyRecord, CryptoKeyVersionRecord, KeyState, VersionInfo, VersionSelection } from "./model.js";
import { applyTransition } from "./state-machine.js";
import type { Transition } from "./state-machine.js";

export interface KeyManagerSettings {
  destroyGraceMs: number;
}

export interface NewKey {
  parentId: string;
  name: string;
  description: string;
  labels: string[];
  rotationPeriodMs: number | null;
  defaultAlgorithm: Algorithm;
  owner: string;
}

// Only the fields named by an update mask are present.
export interface KeyChanges {
  name?: string;
  description?: string;
  labels?: string[];
  rotationPeriodMs?: number | null;
  nextRotationAt?: number | null;
  defaultAlgorithm?: Algorithm;
}

export interface KeyView {
  readonly key: Readonly<CryptoKeyRecord>;
  readonly primary: VersionInfo | null;
}

// One fixed text for every decryption failure, so the answer tells an attacker nothing.
const INVALID_CIPHERTEXT =
  "invalid: it was altered or truncated, or was not made with this key and this additional authenticated data";

// Base32 in ASCII order (digits first), so that ids compare as their values do.
const ID_ALPHABET = "234567abcdefghijklmnopqrstuvwxyz";
const TIME_CHARS = 9;
const RANDOM_CHARS = 11;

// 20 characters of lowercase base32: the creation time in milliseconds (9 characters, 45 bits, good until the year
// 3084), then 55 random bits. Opaque and URL-safe as before; ordered by time so that a new key's rows go at the end
// of the key and version indexes instead of on a random page of each: with 100 random bits a create dirtied two
// random index pages, and cost 65 µs of storage CPU at 100k-300k keys against 34-39 µs (docs/performance.md). 55
// random bits a millisecond leave a collision less likely than one in 10^13 at 64 creates in one millisecond; the
// primary key refuses one anyway.
// Written into bytes and decoded once, so that the id is one flat string: built by appending characters it would be a
// chain of eight rope nodes, 256 bytes of heap kept with every key created in this process and cached.
export function newKeyId(now: number): string {
  const chars = randomBytes(TIME_CHARS + RANDOM_CHARS);
  let time = Math.max(0, Math.floor(now));
  for (let i = TIME_CHARS - 1; i >= 0; i--) {
    chars[i] = ID_ALPHABET.charCodeAt(time % 32);
    time = Math.floor(time / 32);
  }
  for (let i = TIME_CHARS; i < chars.length; i++) chars[i] = ID_ALPHABET.charCodeAt(chars[i]! & 31);
  return chars.toString("latin1");
}

export function keyNotFound(keyId: string): DomainError {
  return notFound("kms", "CRYPTO_KEY_NOT_FOUND", { resourceType: "kms.v1.CryptoKey", resourceName: keyId }, `key ${keyId} not found`);
}

function versionNotFound(keyId: string, versionId: number): DomainError {
  return notFound(
    "kms",
    "CRYPTO_KEY_VERSION_NOT_FOUND",
    { resourceType: "kms.v1.CryptoKeyVersion", resourceName: `keys/${keyId}/versions/${versionId}` },
    `key ${keyId} has no version ${versionId}`,
  );
}

function notEnabled(keyId: string, versionId: number, state: string): DomainError {
  return failedPrecondition(
    "kms",
    "CRYPTO_KEY_VERSION_NOT_ENABLED",
    `keys/${keyId}/versions/${versionId}`,
    `key version ${versionId} of key ${keyId} is not enabled, current state is: ${state}`,
  );
}

// Why a version offers no key: it is not ENABLED, or its key's destruction is pending (the entry then holds no
// material for any version, key-cache.ts).
function unusable(keyId: string, versionId: number, state: string): DomainError {
  return state === "ENABLED" ? destructionScheduled(keyId) : notEnabled(keyId, versionId, state);
}

function destructionScheduled(keyId: string): DomainError {
  return failedPrecondition(
    "kms",
    "CRYPTO_KEY_DESTRUCTION_SCHEDULED",
    `keys/${keyId}`,
    `key ${keyId} is scheduled for destruction: it serves no Encrypt or Decrypt and takes no new version until one of its versions is restored, enabled and made primary`,
  );
}

// A mutation that reads no version but the primary.
const NO_VERSION: VersionSelection = { ids: [] };

// The key management domain: every rule of CONTRACT section 5 lives here, in terms of plain records.
export class KeyManager {
  constructor(
    private readonly store: KmsStore,
    private readonly cache: KeyCache,
    private readonly masterKey: MasterKey,
    private readonly clock: Clock,
    private readonly settings: KeyManagerSettings,
  ) {}

  private newVersion(keyId: string, id: number, algorithm: Algorithm, now: number): CryptoKeyVersionRecord {
    const material = randomBytes(keyLengthBytes[algorithm]);
    const wrappedMaterial = this.masterKey.wrap(material, keyId, id);
    material.fill(0);
    return { keyId, id, state: "ENABLED", algorithm, createdAt: now, destroyAt: null, wrappedMaterial };
  }

  // Runs a decision on one key in the store's transaction, on the versions `selection` names (and the primary): a
  // change of one version reads that one, whatever the key holds (KeyState). The cache's change is made inside that
  // transaction, so material the master key cannot unwrap aborts the write instead of surfacing after the commit;
  // it is applied only once the write has committed, so a failed write leaves the cache as it was.
  private async commit<T>(keyId: string, now: number, selection: VersionSelection, decide: (current: KeyState) => KeyMutation<T>) {
    const outcome = await this.store.mutateKey(
      keyId,
      now,
      (current) => {
        const mutation = decide(current);
        return { ...mutation, result: { result: mutation.result, change: this.cache.prepare(current, mutation) } };
      },
      selection,
    );
    if (outcome === null) return null;
    const view = this.cache.apply(outcome.result.change, this.store.commitsInOrder);
    return { view, result: outcome.result.result };
  }

  // Runs a decision on a live key.
  private async mutate<T>(keyId: string, selection: VersionSelection, decide: (current: KeyState, now: number) => KeyMutation<T>) {
    const now = this.clock.now();
    const outcome = await this.commit(keyId, now, selection, (current) => {
      if (isGone(current.key, now)) throw keyNotFound(keyId);
      return decide(current, now);
    });
    if (outcome === null) throw keyNotFound(keyId);
    return outcome;
  }

  async createKey(input: NewKey): Promise<KeyView> {
    const now = this.clock.now();
    const id = newKeyId(now);
    const first = this.newVersion(id, 1, input.defaultAlgorithm, now);
    const key: CryptoKeyRecord = {
      id,
      parentId: input.parentId,
      name: input.name,
      description: input.description,
      owner: input.owner,
      labels: input.labels,
      rotationPeriodMs: input.rotationPeriodMs,
      nextRotationAt: input.rotationPeriodMs === null ? null : rotationAfter(now, input.rotationPeriodMs),
      defaultAlgorithm: input.defaultAlgorithm,
      primaryVersionId: 1,
      nextVersionId: 2,
      createdAt: now,
      goneAt: null,
    };
    const aggregate = { key, versions: [first] };
    // Built before the write and installed after it, as in commit().
    const entry = this.cache.build(aggregate);
    await this.store.createKey(aggregate, now);
    return this.cache.install(entry).view;
  }

  // Key reads answer from the cache, as Encrypt does: synchronously on a hit.
  getKey(keyId: string): KeyView | Promise<KeyView> {
    const entry = this.cached(keyId, true);
    return entry instanceof Promise ? entry.then((e) => e.view) : entry.view;
  }

  listKeys(parentId: string, page: KeyPage): Promise<KeyView[]> {
    return this.store.listKeys(parentId, this.clock.now(), page);
  }

  async updateKey(keyId: string, changes: KeyChanges): Promise<KeyView> {
    const { view } = await this.mutate(keyId, NO_VERSION, (current, now) => {
      const key = { ...current.key, ...changes };
      if (changes.rotationPeriodMs === null) {
        // Rotation stops: a next time given with it under the same mask would be dropped without a word.
        if (changes.nextRotationAt !== undefined && changes.nextRotationAt !== null) {
          throw invalidArgument("kms", [{ field: "key.nextRotationTime", description: "a next rotation time needs a rotationPeriod" }]);
        }
        key.nextRotationAt = null;
      } else if (changes.rotationPeriodMs !== undefined && (changes.nextRotationAt ?? null) === null) {
        // A period set with no next time (left out, or cleared under the same mask) starts from now.
        key.nextRotationAt = rotationAfter(now, changes.rotationPeriodMs);
      } else if (changes.nextRotationAt === null && key.rotationPeriodMs !== null) {
        // The key would still show its period and never rotate again.
        throw invalidArgument("kms", [
          {
            field: "key.nextRotationTime",
            description: "cannot be cleared while the key has a rotationPeriod; clear rotationPeriod (in the mask, empty) to stop rotation, or give a new time",
          },
        ]);
      }
      if (key.nextRotationAt !== null && key.rotationPeriodMs === null) {
        throw invalidArgument("kms", [
          { field: "key.nextRotationTime", description: "a next rotation time needs a rotationPeriod" },
        ]);
      }
      if (changes.nextRotationAt !== undefined && changes.nextRotationAt !== null && changes.nextRotationAt <= now) {
        throw invalidArgument("kms", [{ field: "key.nextRotationTime", description: "must be in the future" }]);
      }
      return { key, versions: [], result: undefined };
    });
    return view;
  }

  async destroyKey(keyId: string): Promise<void> {
    await this.mutate(keyId, "all", (current, now) => {
      // Every version not yet destroyed is scheduled, the primary included: that is what destroying a key means.
      const versions = current.versions
        .filter((v) => effectiveState(v, now) === "ENABLED" || effectiveState(v, now) === "DISABLED")
        .map((v) => ({ ...v, state: "DESTROYED_SCHEDULED" as const, destroyAt: now + this.settings.destroyGraceMs }));
      return { key: { ...current.key, goneAt: computeGoneAt(mergeVersions(current.versions, versions), now) }, versions, result: undefined };
    });
  }

  // In id order, as the store pages them.
  listVersions(keyId: string, page: KeyPage): readonly VersionInfo[] | Promise<readonly VersionInfo[]> {
    const entry = this.cached(keyId, true);
    const slice = (e: KeyEntry) => e.infosPage(page.offset, page.limit);
    return entry instanceof Promise ? entry.then(slice) : slice(entry);
  }

  async createVersion(keyId: string, algorithm: Algorithm | null): Promise<CryptoKeyVersionRecord> {
    const { result } = await this.mutate(keyId, NO_VERSION, (current, now) => {
      // A new version would otherwise serve at once, undoing the destruction its owner asked for.
      if (destructionPending(current.key, current.versions)) throw destructionScheduled(keyId);
      const version = this.newVersion(keyId, current.key.nextVersionId, algorithm ?? current.key.defaultAlgorithm, now);
      const key = { ...current.key, nextVersionId: version.id + 1, goneAt: null };
      return { key, versions: [version], result: version };
    });
    return result;
  }

  getVersion(keyId: string, versionId: number): VersionInfo | Promise<VersionInfo> {
    const entry = this.cached(keyId, true);
    const find = (e: KeyEntry) => {
      const version = e.version(versionId);
      if (version === undefined) throw versionNotFound(keyId, versionId);
      return version.info;
    };
    return entry instanceof Promise ? entry.then(find) : find(entry);
  }

  async transition(keyId: string, versionId: number, transition: Transition): Promise<CryptoKeyVersionRecord> {
    const { result } = await this.mutate(keyId, { ids: [versionId] }, (current, now) => {
      const version = current.versions.find((v) => v.id === versionId);
      if (version === undefined) throw versionNotFound(keyId, versionId);
      const outcome = applyTransition(version, transition, {
        now,
        isPrimary: current.key.primaryVersionId === versionId,
        destroyGraceMs: this.settings.destroyGraceMs,
      });
      const versions = outcome.changed ? [outcome.version] : [];
      return {
        key: { ...current.key, goneAt: computeGoneAt(mergeVersions(current.versions, versions), now, current.others) },
        versions,
        result: outcome.version,
      };
    });
    return result;
  }

  async setPrimary(keyId: string, versionId: number): Promise<KeyView> {
    const { view } = await this.mutate(keyId, { ids: [versionId] }, (current, now) => {
      const version = current.versions.find((v) => v.id === versionId);
      if (version === undefined) throw versionNotFound(keyId, versionId);
      const state = effectiveState(version, now);
      if (state !== "ENABLED") throw notEnabled(keyId, versionId, state);
      return { key: { ...current.key, primaryVersionId: versionId }, versions: [], result: undefined };
    });
    return view;
  }

  // The hot path: a cache hit returns synchronously and touches no disk. `metadataOnly`: for reads that need no
  // material, so that a key whose material does not unwrap (rows altered behind the server's back) is still
  // described, from an entry that is not installed.
  private cached(keyId: string, metadataOnly = false): KeyEntry | Promise<KeyEntry> {
    const hit = this.cache.get(keyId);
    if (hit === undefined) return this.load(keyId, metadataOnly);
    if (hit.goneAt !== null && hit.goneAt <= this.clock.now()) throw keyNotFound(keyId);
    return hit;
  }

  private async load(keyId: string, metadataOnly: boolean): Promise<KeyEntry> {
    const generation = this.cache.generation;
    const aggregate = await this.store.getKey(keyId);
    if (aggregate === null || isGone(aggregate.key, this.clock.now())) throw keyNotFound(keyId);
    let entry: CachedKey;
    try {
      entry = this.cache.build(aggregate);
    } catch (err) {
      if (metadataOnly) return this.cache.build(aggregate, false);
      throw err;
    }
    return this.cache.installLoaded(entry, generation);
  }

  // The namespace of a live key, for the access check; null when no live key has the id. A cache hit answers
  // synchronously, and the entry it loads otherwise serves the call's handler right after. Metadata only: a key whose
  // material does not unwrap is still described (GetCryptoKey and the version reads answered 500 for it, since this
  // check loaded the material first; a probe, 2026-11-28), and Encrypt and Decrypt then fail on it themselves.
  namespaceOf(keyId: string): string | null | Promise<string | null> {
    const missing = (err: unknown): null => {
      if (err instanceof DomainError && err.detail.reason === "CRYPTO_KEY_NOT_FOUND") return null;
      throw err;
    };
    let entry;
    try {
      entry = this.cached(keyId, true);
    } catch (err) {
      return missing(err);
    }
    if (entry instanceof Promise) return entry.then((e) => e.parentId, missing);
    return entry.parentId;
  }

  // The version Encrypt seals with: it must exist and be ENABLED. A cache hit answers synchronously, with a key good
  // for the caller's synchronous turn (packed-keys.ts); a miss, with one good for as long as the caller holds it.
  sealingKey(keyId: string, versionId: number): VersionKey | Promise<VersionKey> {
    const entry = this.cached(keyId);
    if (entry instanceof Promise) return entry.then((e) => this.enabledKey(e, versionId));
    return this.enabledKey(entry, versionId);
  }

  encrypt(keyId: string, versionId: number, plaintext: Uint8Array, aad: Uint8Array): Uint8Array | Promise<Uint8Array> {
    const key = this.sealingKey(keyId, versionId);
    if (key instanceof Promise) return key.then((k) => seal(k, plaintext, aad));
    return seal(key, plaintext, aad);
  }

  private enabledKey(entry: KeyEntry, versionId: number): VersionKey {
    const version = entry.version(versionId);
    if (version === undefined) throw versionNotFound(entry.id, versionId);
    if (version.key === null) throw unusable(entry.id, versionId, effectiveState(version, this.clock.now()));
    return version.key;
  }

  decrypt(keyId: string, ciphertext: Uint8Array, aad: Uint8Array): { versionId: number; plaintext: Uint8Array } | Promise<{ versionId: number; plaintext: Uint8Array }> {
    const entry = this.cached(keyId);
    if (entry instanceof Promise) return entry.then((e) => this.openWith(e, ciphertext, aad));
    return this.openWith(entry, ciphertext, aad);
  }

  private openWith(entry: KeyEntry, ciphertext: Uint8Array, aad: Uint8Array): { versionId: number; plaintext: Uint8Array } {
    const versionId = ciphertextVersion(ciphertext);
    const version = versionId === null ? undefined : entry.version(versionId);
    // A ciphertext naming a version this key never had is as invalid as a tampered one: same answer.
    if (versionId === null || version === undefined) throw invalidCiphertext();
    if (version.key === null) throw unusable(entry.id, versionId, effectiveState(version, this.clock.now()));
    const plaintext = open(version.key, ciphertext, aad);
    if (plaintext === null) throw invalidCiphertext();
    return { versionId, plaintext };
  }

  // Drops the copies of erased material the store keeps beside its rows; false when it could not now.
  scrubErased(): Promise<boolean> {
    return this.store.scrubErased();
  }

  // Erases the material of every version whose destroyAt has passed. Returns how many keys it touched.
  async sweepDestroyed(limit = 100): Promise<number> {
    const now = this.clock.now();
    const keyIds = await this.store.keysWithDueDestruction(now, limit);
    for (const keyId of keyIds) {
      await this.commit(keyId, now, "all", (current) => {
        const versions = current.versions
          .filter((v) => v.state === "DESTROYED_SCHEDULED" && v.destroyAt !== null && v.destroyAt <= now)
          .map((v) => ({ ...v, state: "DESTROYED" as const, wrappedMaterial: null }));
        return { key: { ...current.key, goneAt: computeGoneAt(mergeVersions(current.versions, versions), now) }, versions, result: undefined };
      });
    }
    return keyIds.length;
  }

  // Creates a new primary version for every key whose rotation time has come.
  async rotateDue(limit = 100): Promise<number> {
    const now = this.clock.now();
    const keyIds = await this.store.keysWithDueRotation(now, limit);
    for (const keyId of keyIds) {
      await this.commit(keyId, now, NO_VERSION, (current) => {
        const { key } = current;
        if (key.rotationPeriodMs === null || key.nextRotationAt === null || key.nextRotationAt > now || isGone(key, now)) {
          return { key, versions: [], result: undefined };
        }
        // After a long outage the schedule restarts from now instead of rotating once per missed period.
        let next = rotationAfter(key.nextRotationAt, key.rotationPeriodMs);
        if (next <= now) next = rotationAfter(now, key.rotationPeriodMs);
        // A key being destroyed does not rotate (its new primary would undo the destruction), but its schedule moves
        // on: left due, it came back in every batch, and a hundred such keys kept the sweeper's loop from ending.
        // That includes a key whose every version is scheduled (DestroyCryptoKey): it was not looked at, showed a
        // next rotation in the past, and rotated at once when a version was restored (a contract probe).
        if (destructionPending(key, current.versions)) return { key: { ...key, nextRotationAt: next }, versions: [], result: undefined };
        const version = this.newVersion(keyId, key.nextVersionId, key.defaultAlgorithm, now);
        return {
          key: { ...key, nextVersionId: version.id + 1, primaryVersionId: version.id, nextRotationAt: next },
          versions: [version],
          result: undefined,
        };
      });
    }
    return keyIds.length;
  }
}

function invalidCiphertext(): DomainError {
  return invalidArgument("kms", [{ field: "ciphertext", description: INVALID_CIPHERTEXT }], "CIPHERTEXT_INVALID");
}
