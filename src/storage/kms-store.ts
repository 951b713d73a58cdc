import type { CryptoKeyRecord, CryptoKeyVersionRecord, KeyAggregate, KeyState, VersionSelection } from "../kms/model.js";

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
  // Whether the mutations of a key finish (their promises resolve) in the order they were committed, and no other
  // process writes keys: then the state a mutation committed may be installed in the key cache once it returns
  // (SQLite: one server, writes one after another). Otherwise (PostgreSQL: a pool of connections, other servers) two
  // commits of one key can return out of order, and the older state, installed last, outlived the notices that were
  // to evict it: a disabled version went on serving for minutes (a probe, 2026-11-28). The key manager then evicts
  // the key instead, and the next call reads it from the store.
  readonly commitsInOrder: boolean;
  createKey(aggregate: KeyAggregate, now: number): Promise<void>;
  getKey(keyId: string): Promise<KeyAggregate | null>;
  // Keys of a namespace that are not gone at `now`, ordered by createdAt then id, with their primary version.
  listKeys(parentId: string, now: number, page: KeyPage): Promise<{ key: CryptoKeyRecord; primary: CryptoKeyVersionRecord | null }[]>;
  // Runs `decide` on the current state of the key inside one transaction and stores its outcome. Returns null
  // when the key does not exist. `decide` may throw a domain error, which aborts the transaction. It sees the
  // versions `selection` names and the primary (KeyState), and a tally of the others; the aggregate returned holds
  // those versions as the mutation left them, with any it added.
  mutateKey<T>(
    keyId: string,
    now: number,
    decide: (current: KeyState) => KeyMutation<T>,
    selection?: VersionSelection,
  ): Promise<{ aggregate: KeyAggregate; result: T } | null>;
  // Ids of keys with a version whose destroyAt is at or before `now` and not yet erased.
  keysWithDueDestruction(now: number, limit: number): Promise<string[]>;
  // Ids of keys not gone at `now` (those being destroyed included) whose nextRotationTime is at or before `now`.
  keysWithDueRotation(now: number, limit: number): Promise<string[]>;
  // After material was erased from its rows: drops the copies the store keeps beside them (SQLite: the write-ahead
  // log; PostgreSQL: dead row versions). False when it could not now, to be tried again.
  scrubErased(): Promise<boolean>;
  close(): Promise<void>;
}

// The check value of the master key the stored material is wrapped under (src/kms/master-key-check.ts): never
// the key itself, only a MAC of a constant under it and a short identifier derived from that MAC.
export interface MasterKeyCheckRecord {
  scheme: string;
  keyId: string;
  checkValue: Uint8Array;
}

// One stored, not yet erased, wrapped key material and the row it belongs to (its additional data).
export interface WrappedMaterial {
  keyId: string;
  versionId: number;
  wrappedMaterial: Uint8Array;
}

// What the store keeps about the master key, and the one write that touches every wrapped material.
//
// It runs at start-up, before anything listens (a wrong master key is refused then), and in the re-wrap command.
export interface MasterKeyStore {
  readMasterKeyCheck(): Promise<MasterKeyCheckRecord | null>;
  // Records the check value if none is recorded yet; an existing one is left as it is.
  recordMasterKeyCheck(check: MasterKeyCheckRecord, now: number): Promise<void>;
  // Whether any key was ever created, whatever its state: a store that never held one is the only kind for which a
  // new master key may be generated.
  holdsKeys(): Promise<boolean>;
  // Any one stored wrapped material, or null if there is none.
  anyWrappedMaterial(): Promise<WrappedMaterial | null>;
  countWrappedMaterial(): Promise<number>;
  // In ONE transaction: replaces every stored wrapped material with what `rewrap` returns for it (in primary key
  // order) and the check value with `check`. `rewrap` throwing aborts the whole transaction. Returns how many
  // materials were re-wrapped.
  rewrapAll(rewrap: (material: WrappedMaterial) => Uint8Array, check: MasterKeyCheckRecord, now: number): Promise<number>;
}
