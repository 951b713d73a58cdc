import { describe, expect, it } from "vitest";
import { DomainError } from "../../src/errors/domain-error.js";
import type { CryptoKeyVersionRecord, VersionState } from "../../src/kms/model.js";
import { applyTransition } from "../../src/kms/state-machine.js";
import type { Transition } from "../../src/kms/state-machine.js";

const now = 1_000_000;
const grace = 5_000;

function version(state: VersionState, destroyAt: number | null = null): CryptoKeyVersionRecord {
  return { keyId: "k", id: 2, state, algorithm: "AES_256", createdAt: 0, destroyAt, wrappedMaterial: new Uint8Array(1) };
}

// The table of CONTRACT section 5, row by row: the resulting state or the error reason.
const table: [VersionState, Transition, VersionState | string][] = [
  ["ENABLED", "enable", "ENABLED"],
  ["ENABLED", "disable", "DISABLED"],
  ["ENABLED", "destroy", "DESTROYED_SCHEDULED"],
  ["ENABLED", "restore", "CRYPTO_KEY_VERSION_STATE_TRANSITION"],
  ["DISABLED", "enable", "ENABLED"],
  ["DISABLED", "disable", "DISABLED"],
  ["DISABLED", "destroy", "DESTROYED_SCHEDULED"],
  ["DISABLED", "restore", "CRYPTO_KEY_VERSION_STATE_TRANSITION"],
  ["DESTROYED_SCHEDULED", "enable", "CRYPTO_KEY_VERSION_STATE_TRANSITION"],
  ["DESTROYED_SCHEDULED", "disable", "CRYPTO_KEY_VERSION_STATE_TRANSITION"],
  ["DESTROYED_SCHEDULED", "destroy", "DESTROYED_SCHEDULED"],
  ["DESTROYED_SCHEDULED", "restore", "DISABLED"],
  ["DESTROYED", "enable", "CRYPTO_KEY_VERSION_STATE_TRANSITION"],
  ["DESTROYED", "disable", "CRYPTO_KEY_VERSION_STATE_TRANSITION"],
  ["DESTROYED", "destroy", "CRYPTO_KEY_VERSION_STATE_TRANSITION"],
  ["DESTROYED", "restore", "CRYPTO_KEY_VERSION_STATE_TRANSITION"],
];

function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof DomainError) return e.detail.reason;
    throw e;
  }
  return "no error";
}

describe("version state machine", () => {
  it.each(table)("%s --%s--> %s", (from, transition, expected) => {
    const start = version(from, from === "DESTROYED_SCHEDULED" ? now + 1 : null);
    const run = () => applyTransition(start, transition, { now, isPrimary: false, destroyGraceMs: grace });
    if (expected.startsWith("CRYPTO_")) {
      expect(reasonOf(run)).toBe(expected);
    } else {
      const result = run();
      expect(result.version.state).toBe(expected);
      expect(result.changed).toBe(from !== expected);
    }
  });

  it("sets destroyAt to now plus the grace period on destroy and clears it on restore", () => {
    const destroyed = applyTransition(version("DISABLED"), "destroy", { now, isPrimary: false, destroyGraceMs: grace });
    expect(destroyed.version.destroyAt).toBe(now + grace);
    const restored = applyTransition(destroyed.version, "restore", { now: now + 1, isPrimary: false, destroyGraceMs: grace });
    expect(restored.version.destroyAt).toBeNull();
    expect(restored.version.state).toBe("DISABLED");
  });

  it("refuses to disable or destroy the primary version, but allows enabling it", () => {
    for (const t of ["disable", "destroy"] as const) {
      expect(reasonOf(() => applyTransition(version("ENABLED"), t, { now, isPrimary: true, destroyGraceMs: grace }))).toBe(
        "CRYPTO_KEY_VERSION_IS_PRIMARY",
      );
    }
    expect(applyTransition(version("ENABLED"), "enable", { now, isPrimary: true, destroyGraceMs: grace }).changed).toBe(false);
  });

  it("lets a DISABLED primary (restored after DestroyCryptoKey) be destroyed again", () => {
    const result = applyTransition(version("DISABLED"), "destroy", { now, isPrimary: true, destroyGraceMs: grace });
    expect(result.version).toMatchObject({ state: "DESTROYED_SCHEDULED", destroyAt: now + grace });
  });

  it("treats a scheduled version past destroyAt as DESTROYED: restore is refused", () => {
    const due = version("DESTROYED_SCHEDULED", now - 1);
    const error = (() => {
      try {
        applyTransition(due, "restore", { now, isPrimary: false, destroyGraceMs: grace });
      } catch (e) {
        return e as DomainError;
      }
      return null;
    })();
    expect(error?.detail.reason).toBe("CRYPTO_KEY_VERSION_STATE_TRANSITION");
    expect(error?.message).toContain("current state is: DESTROYED");
  });
});
