import type { MasterKeyStore } from "../storage/kms-store.js";
import { removeDurably, renameDurably, writeFileAtomically } from "../shared/durable-file.js";
import { masterKeyCheck, requireMatchingMasterKey } from "./master-key-check.js";
import { masterKeyFileText, stagedMasterKeyPath } from "./master-key-source.js";
import type { ResolvedMasterKey } from "./master-key-source.js";
import { MasterKey } from "./master-key.js";

// Moves every stored key material from the current master key to a new one (docs/master-key-check.md, "Re-wrapping").
// The order is what makes a crash at any point harmless:
//
//   1. check the current key against the data (recording its check value if the store predates them);
//   2. own-file layout only: write the new key to master.key.new (complete or absent, never partial);
//   3. ONE transaction: every material re-wrapped, and the check value replaced by the new key's;
//   4. own-file layout only: rename master.key.new over master.key.
//
// Before 3 commits the data is under the old key, after it under the new one, and the check value says which. A
// crash between 2 and 4 leaves both files; start-up keeps the one matching the check value (master-key-source.ts).

export type RewrapStep = "verified" | "new-key-staged" | "rewrapping" | "committed" | "key-replaced";

export interface RewrapPlan {
  store: MasterKeyStore;
  dataDir: string;
  current: ResolvedMasterKey;
  next: Uint8Array;
  nextOrigin: string;
  now: number;
  // What the command prints.
  report(line: string): void;
  // Called after each step ("rewrapping": halfway through the materials, inside the transaction).
  onStep?(step: RewrapStep): void;
}

export interface RewrapOutcome {
  rewrapped: number;
  oldKeyId: string;
  newKeyId: string;
}

export async function rewrapMasterKey(plan: RewrapPlan): Promise<RewrapOutcome> {
  const { store, current, report } = plan;
  const next = new MasterKey(plan.next);
  const oldKeyId = masterKeyCheck(current.key).keyId;
  const newCheck = masterKeyCheck(next);
  if (newCheck.keyId === oldKeyId) throw new Error(`the new master key (${plan.nextOrigin}) is the one configured now (key id ${oldKeyId})`);
  await requireMatchingMasterKey(current.key, store, { origin: current.origin, dataDir: plan.dataDir }, plan.now);
  report(`current master key: ${current.origin} (key id ${oldKeyId}), matches the data`);
  report(`new master key: ${plan.nextOrigin} (key id ${newCheck.keyId})`);
  plan.onStep?.("verified");

  const staged = current.ownFile === null ? null : stagedMasterKeyPath(plan.dataDir);
  let rewrapped: number;
  try {
    if (staged !== null) {
      writeFileAtomically(staged, masterKeyFileText(plan.next));
      report(`wrote the new key to ${staged}`);
      plan.onStep?.("new-key-staged");
    }
    const total = await store.countWrappedMaterial();
    let done = 0;
    rewrapped = await store.rewrapAll(
      (m) => {
        let material: Uint8Array;
        try {
          material = current.key.unwrap(m.wrappedMaterial, m.keyId, m.versionId);
        } catch {
          throw new Error(
            `the stored material of key ${m.keyId} version ${m.versionId} does not unwrap under the current master key, ` +
              "although other material does: the store was altered",
          );
        }
        const wrapped = next.wrap(material, m.keyId, m.versionId);
        material.fill(0);
        next.unwrap(wrapped, m.keyId, m.versionId).fill(0);
        if (++done === Math.ceil(total / 2)) plan.onStep?.("rewrapping");
        return wrapped;
      },
      newCheck,
      plan.now,
    );
  } catch (err) {
    // Nothing committed: the data is still under the current key, and the staged file must not linger.
    if (staged !== null) removeDurably(staged);
    throw err;
  }
  report(`re-wrapped ${rewrapped} key material(s) under key id ${newCheck.keyId} and recorded its check value, in one transaction`);
  plan.onStep?.("committed");

  if (staged !== null && current.ownFile !== null) {
    renameDurably(staged, current.ownFile);
    report(`replaced ${current.ownFile} with the new key (key id ${newCheck.keyId}); back it up, the old key no longer opens this data`);
    plan.onStep?.("key-replaced");
  } else {
    report(
      `the data is now under the new master key only: start the server with it (MASTER_KEY_FILE=${plan.nextOrigin}, ` +
        `or its base64 in MASTER_KEY) instead of ${current.origin}, which no longer opens this data`,
    );
  }
  return { rewrapped, oldKeyId, newKeyId: newCheck.keyId };
}
