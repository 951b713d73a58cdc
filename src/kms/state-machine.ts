import { failedPrecondition } from "../errors/domain-error.js";
import type { CryptoKeyVersionRecord, VersionState } from "./model.js";
import { effectiveState } from "./model.js";

export type Transition = "enable" | "disable" | "destroy" | "restore";

// CONTRACT section 5. For each transition: the states it may start from, and the state it leads to. Asking
// for the state a version is already in returns it unchanged (the target appears among the sources).
const transitions: Record<Transition, { from: readonly VersionState[]; to: VersionState; needs: string }> = {
  enable: { from: ["ENABLED", "DISABLED"], to: "ENABLED", needs: "ENABLED or DISABLED" },
  disable: { from: ["ENABLED", "DISABLED"], to: "DISABLED", needs: "ENABLED or DISABLED" },
  destroy: {
    from: ["ENABLED", "DISABLED", "DESTROYED_SCHEDULED"],
    to: "DESTROYED_SCHEDULED",
    needs: "ENABLED or DISABLED",
  },
  restore: { from: ["DESTROYED_SCHEDULED"], to: "DISABLED", needs: "DESTROYED_SCHEDULED" },
};

export interface TransitionResult {
  version: CryptoKeyVersionRecord;
  changed: boolean;
}

export function applyTransition(
  version: CryptoKeyVersionRecord,
  transition: Transition,
  options: { now: number; isPrimary: boolean; destroyGraceMs: number },
): TransitionResult {
  const current = effectiveState(version, options.now);
  const rule = transitions[transition];
  const subject = `keys/${version.keyId}/versions/${version.id}`;
  if (!rule.from.includes(current)) {
    throw failedPrecondition(
      "kms",
      "CRYPTO_KEY_VERSION_STATE_TRANSITION",
      subject,
      `cannot ${transition} key version ${version.id} of key ${version.keyId}: it must be ${rule.needs}, current state is: ${current}`,
    );
  }
  if (current === rule.to) return { version, changed: false };
  // Only an ENABLED primary is kept: after DestroyCryptoKey and a restore the primary is DISABLED, and the table of
  // CONTRACT section 5 lets a DISABLED version be destroyed again.
  if (options.isPrimary && current === "ENABLED" && (transition === "disable" || transition === "destroy")) {
    throw failedPrecondition(
      "kms",
      "CRYPTO_KEY_VERSION_IS_PRIMARY",
      subject,
      `cannot ${transition} key version ${version.id} of key ${version.keyId}: it is the primary version; make another version primary first`,
    );
  }
  const destroyAt = rule.to === "DESTROYED_SCHEDULED" ? options.now + options.destroyGraceMs : null;
  return { version: { ...version, state: rule.to, destroyAt }, changed: true };
}
