// The key management domain model: plain data, no protocol types. Times are epoch milliseconds.

export const algorithms = ["AES_128", "AES_192", "AES_256"] as const;
export type Algorithm = (typeof algorithms)[number];

export const versionStates = ["ENABLED", "DISABLED", "DESTROYED_SCHEDULED", "DESTROYED"] as const;
export type VersionState = (typeof versionStates)[number];

export const keyLengthBytes: Record<Algorithm, number> = { AES_128: 16, AES_192: 24, AES_256: 32 };

export interface CryptoKeyRecord {
  id: string;
  parentId: string;
  name: string;
  description: string;
  owner: string;
  labels: string[];
  rotationPeriodMs: number | null;
  nextRotationAt: number | null;
  defaultAlgorithm: Algorithm;
  primaryVersionId: number | null;
  // Version ids are never reused, so the next one is stored rather than derived from the versions left.
  nextVersionId: number;
  createdAt: number;
  // When every version is scheduled for destruction or destroyed: the moment the last one is destroyed (0 when every
  // one is stored DESTROYED, computeGoneAt). The key is gone (not found, name free) from then on. Null while any
  // version is ENABLED or DISABLED.
  goneAt: number | null;
}

export interface CryptoKeyVersionRecord {
  keyId: string;
  id: number;
  state: VersionState;
  algorithm: Algorithm;
  createdAt: number;
  destroyAt: number | null;
  // Key material wrapped by the master key; null once destroyed.
  wrappedMaterial: Uint8Array | null;
}

// A version as reads report it: everything but its material.
export type VersionInfo = Readonly<Omit<CryptoKeyVersionRecord, "wrappedMaterial">>;

export interface KeyAggregate {
  key: CryptoKeyRecord;
  versions: CryptoKeyVersionRecord[];
}

// What a mutation decides on (KmsStore.mutateKey): the key and the versions it selected, in id order, the primary
// always among them; and a tally of the versions it did not select, which is all a change of one version needs of
// the others (computeGoneAt). A change to a key of thousands of versions reads and rebuilds only what it changes.
export interface KeyState extends KeyAggregate {
  // Whether `versions` is every version of the key (then `others` counts none).
  complete: boolean;
  others: VersionTally;
}

// Of the versions not selected.
export interface VersionTally {
  count: number;
  // ENABLED or DISABLED.
  live: number;
  // The latest destroyAt of those DESTROYED_SCHEDULED, or null when none is.
  latestScheduled: number | null;
}

export const NO_VERSIONS: VersionTally = Object.freeze({ count: 0, live: 0, latestScheduled: null });

// Which versions a mutation reads: every one, or those named (the primary is always read too).
export type VersionSelection = "all" | { ids: readonly number[] };

// google.protobuf.Timestamp's last millisecond, 9999-12-31T23:59:59.999Z: a stored time past it cannot be written as a
// response, and failed the key and every list of its namespace with INTERNAL (storage migration 10 repaired those).
export const LAST_TIMESTAMP_MS = 253_402_300_799_999;

// The rotation time one period after `from`, at most LAST_TIMESTAMP_MS: a key rotated when the clock read the
// year 9999 got a next time past it (a probe of the clock, 2026-11-28), and its namespace answered INTERNAL again.
// Such a key rotates at that last millisecond, as the migration's repaired keys do.
export function rotationAfter(from: number, periodMs: number): number {
  return Math.min(from + periodMs, LAST_TIMESTAMP_MS);
}

// A version whose destroyAt has passed is destroyed at once, even if the sweeper has not erased it yet.
export function effectiveState(version: Pick<CryptoKeyVersionRecord, "state" | "destroyAt">, now: number): VersionState {
  if (version.state === "DESTROYED_SCHEDULED" && version.destroyAt !== null && version.destroyAt <= now) {
    return "DESTROYED";
  }
  return version.state;
}

// After DestroyCryptoKey a key serves neither Encrypt nor Decrypt, takes no new version and does not rotate, until
// one of its versions is restored, enabled and made primary (CONTRACT section 5). Outside that the primary is always
// ENABLED: an ENABLED primary can be neither disabled nor destroyed, and only an ENABLED version can be made primary.
// So a primary in another state is exactly a pending destruction, and nothing more needs storing.
export function destructionPending(
  key: Pick<CryptoKeyRecord, "primaryVersionId">,
  versions: readonly Pick<CryptoKeyVersionRecord, "id" | "state">[],
): boolean {
  if (key.primaryVersionId === null) return false;
  const primary = versions.find((v) => v.id === key.primaryVersionId);
  return primary !== undefined && primary.state !== "ENABLED";
}

export function isGone(key: CryptoKeyRecord, now: number): boolean {
  return key.goneAt !== null && key.goneAt <= now;
}

// The versions of a key after a mutation: each changed or new version replaces or joins the current ones, in
// id order. The store writes exactly this and the key manager decides and caches from it, so the two cannot
// disagree about what a mutation left behind.
export function mergeVersions(current: CryptoKeyVersionRecord[], changed: CryptoKeyVersionRecord[]): CryptoKeyVersionRecord[] {
  const byId = new Map(current.map((v) => [v.id, v]));
  for (const v of changed) byId.set(v.id, v);
  return [...byId.values()].sort((a, b) => a.id - b.id);
}

// Recomputes goneAt after the versions changed: `versions` as they now are, `others` the rest of the key's versions.
// A version stored DESTROYED (its material erased) is gone whatever the clock says, so it counts as gone since time 0,
// and a key of such versions only has goneAt 0: it was the time of the sweep, and a clock stepped back past it
// brought the key back, DESTROYED primary and all, beside a new key that had taken its name (a probe, 2026-11-28).
export function computeGoneAt(versions: CryptoKeyVersionRecord[], now: number, others: VersionTally = NO_VERSIONS): number | null {
  if (others.live > 0) return null;
  let last = others.latestScheduled ?? 0;
  for (const v of versions) {
    if (v.state === "ENABLED" || v.state === "DISABLED") return null;
    if (v.state === "DESTROYED_SCHEDULED") last = Math.max(last, v.destroyAt ?? now);
  }
  return versions.length + others.count === 0 ? null : last;
}
