import type { CryptoKeyRecord, CryptoKeyVersionRecord, KeyAggregate } from "../kms/model.js";

// What a mutation of one key decides: the key row as it should be stored and the version rows that are new
// or changed. `result` is handed back to the caller unchanged.
export interface KeyMutation<T> {
  key: CryptoKeyRecord;
  versions: CryptoKeyVersionRecord[];
  result: T;
}

export interface KeyPage {
  limit: number;
  offset: number;
}

// Storage of keys and versions. Implementations make mutateKey atomic per key (a transaction holding the
// key's row), and enforce name uniqueness among live keys of a namespace (throwing the ALREADY_EXISTS domain
// error), because only the store can see every other key at the moment of the write.
export interface KmsStore {
  createKey(aggregate: KeyAggregate, now: number): Promise<void>;
  getKey(keyId: string): Promise<KeyAggregate | null>;
  // Keys of a namespace that are not gone at `now`, ordered by createdAt then id, with their primary version.
  listKeys(parentId: string, now: number, page: KeyPage): Promise<{ key: CryptoKeyRecord; primary: CryptoKeyVersionRecord | null }[]>;
  listVersions(keyId: string, page: KeyPage): Promise<CryptoKeyVersionRecord[]>;
  // Runs `decide` on the current state of the key inside one transaction and stores its outcome. Returns null
  // when the key does not exist. `decide` may throw a domain error, which aborts the transaction.
  mutateKey<T>(keyId: string, now: number, decide: (current: KeyAggregate) => KeyMutation<T>): Promise<{ aggregate: KeyAggregate; result: T } | null>;
  // Ids of keys with a version whose destroyAt is at or before `now` and not yet erased.
  keysWithDueDestruction(now: number, limit: number): Promise<string[]>;
  // Ids of live keys whose nextRotationTime is at or before `now`.
  keysWithDueRotation(now: number, limit: number): Promise<string[]>;
  close(): Promise<void>;
}
