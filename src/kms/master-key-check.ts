import { timingSafeEqual } from "node:crypto";
import type { MasterKeyCheckRecord, MasterKeyStore } from "../storage/kms-store.js";
import type { MasterKey } from "./master-key.js";

// The check value binds a data directory to the master key its material is wrapped under, so that a lost or
// replaced key is refused at start-up instead of turning every call on an existing key into INTERNAL. It is the
// HMAC-SHA256 of a fixed label under the master key: it proves a key is the right one, and reveals nothing of the
// key. Its first 8 bytes in hex are the key id, shown in messages and logs to tell keys apart.

export const CHECK_SCHEME = "hmac-sha256-v1";
const CHECK_LABEL = Buffer.from("cloudplane master key check value v1");

export function masterKeyCheck(key: MasterKey): MasterKeyCheckRecord {
  const checkValue = key.mac(CHECK_LABEL);
  return { scheme: CHECK_SCHEME, keyId: checkValue.subarray(0, 8).toString("hex"), checkValue };
}

// What the store says about a master key.
export type MasterKeyVerdict =
  // The recorded check value is this key's.
  | { kind: "matches" }
  // The recorded check value is another key's.
  | { kind: "mismatch"; storedKeyId: string }
  // Nothing recorded (a store from before check values), and this key unwraps a stored material.
  | { kind: "unwraps" }
  // Nothing recorded, and this key fails to unwrap the stored material of that version.
  | { kind: "cannot-unwrap"; keyId: string; versionId: number }
  // Nothing recorded and no material to try: any key is as good as any other.
  | { kind: "nothing-to-check" };

// Reads only; never throws for a wrong key.
export async function judgeMasterKey(key: MasterKey, store: Pick<MasterKeyStore, "readMasterKeyCheck" | "anyWrappedMaterial">): Promise<MasterKeyVerdict> {
  const recorded = await store.readMasterKeyCheck();
  if (recorded !== null) {
    if (recorded.scheme !== CHECK_SCHEME) throw new Error(`the stored master key check value has an unknown scheme "${recorded.scheme}"`);
    const mine = masterKeyCheck(key).checkValue;
    const same = recorded.checkValue.length === mine.length && timingSafeEqual(recorded.checkValue, mine);
    return same ? { kind: "matches" } : { kind: "mismatch", storedKeyId: recorded.keyId };
  }
  const sample = await store.anyWrappedMaterial();
  if (sample === null) return { kind: "nothing-to-check" };
  try {
    key.unwrap(sample.wrappedMaterial, sample.keyId, sample.versionId).fill(0);
    return { kind: "unwraps" };
  } catch {
    return { kind: "cannot-unwrap", keyId: sample.keyId, versionId: sample.versionId };
  }
}

type Refusal = Extract<MasterKeyVerdict, { kind: "mismatch" | "cannot-unwrap" }>;

// Whether a verdict forbids using the key with this store.
export const isRefusal = (verdict: MasterKeyVerdict): verdict is Refusal => verdict.kind === "mismatch" || verdict.kind === "cannot-unwrap";

// A configured master key that is not the one the data directory was written with. Nothing has been changed when
// it is thrown.
export class MasterKeyMismatchError extends Error {}

// `where.database`: the store is the PostgreSQL database of DATABASE_URL rather than the data directory.
export function mismatchMessage(where: { origin: string; dataDir: string; database?: boolean }, key: MasterKey, verdict: Refusal): string {
  const configured = `the master key from ${where.origin} (key id ${masterKeyCheck(key).keyId})`;
  const store = where.database === true ? "the database of DATABASE_URL" : `the data directory ${where.dataDir}`;
  const what =
    verdict.kind === "mismatch"
      ? `${configured} does not match the one ${store} was written with (key id ` +
        `${verdict.storedKeyId}, from the check value stored with the data)`
      : `${configured} cannot unwrap the stored material of key ${verdict.keyId} version ${verdict.versionId}: ` +
        `${store} was written with another master key`;
  const remedy =
    where.database === true
      ? "Start every server with the master key the database was written with (MASTER_KEY or MASTER_KEY_FILE)"
      : "Start with the original master key (MASTER_KEY, MASTER_KEY_FILE or <data-dir>/master.key), or, to move the data " +
        "to another master key, run `npm run rewrap-master-key` with the original one configured (README, \"Settings and " +
        "the master key\")";
  return `${what}; nothing was changed. ${remedy}`;
}

// Start-up: refuses a key the store was not written with, and records the check value when the store has none yet
// (a new store, or one from before check values once the key has unwrapped a stored material). Returns the
// verdict, for the log.
export async function requireMatchingMasterKey(
  key: MasterKey,
  store: MasterKeyStore,
  where: { origin: string; dataDir: string; database?: boolean },
  now: number,
): Promise<MasterKeyVerdict> {
  const verdict = await judgeMasterKey(key, store);
  if (isRefusal(verdict)) throw new MasterKeyMismatchError(mismatchMessage(where, key, verdict));
  if (verdict.kind !== "matches") await store.recordMasterKeyCheck(masterKeyCheck(key), now);
  return verdict;
}
