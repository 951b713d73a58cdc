import type { IdentityStore } from "../storage/identity-store.js";
import type { GrantRecord } from "./identity-model.js";
import { roleAllows } from "./roles.js";
import { scopeCovers } from "./scopes.js";
import type { Scope } from "./scopes.js";

// The answer of an access check. "hidden": the principal holds no grant at all on the scope, so it may not even
// learn that a resource there exists (a key of another namespace answers NOT_FOUND).
export type AccessDecision = "allowed" | "denied" | "hidden";

// Bounds the cache of grants by principal.
const MAX_CACHED = 100_000;

// Decides from the grants in the store whether a principal may use a permission on a scope. Grants are cached per
// principal until access changes (clear()); a read from the store in flight meanwhile is not cached.
export class AccessPolicy {
  private readonly grants = new Map<string, readonly GrantRecord[]>();
  private epoch = 0;

  constructor(private readonly store: IdentityStore) {}

  clear(): void {
    this.grants.clear();
    this.epoch++;
  }

  // The principal's grants: synchronously when cached, else read from the store.
  grantsOf(principalId: string): readonly GrantRecord[] | Promise<readonly GrantRecord[]> {
    return this.grants.get(principalId) ?? this.load(principalId);
  }

  decide(grants: readonly GrantRecord[], permission: string, scope: Scope): AccessDecision {
    let covered = false;
    for (const grant of grants) {
      if (!scopeCovers(grant.scope, scope)) continue;
      if (roleAllows(grant.role, permission)) return "allowed";
      covered = true;
    }
    return covered ? "denied" : "hidden";
  }

  // Whether any grant allows the permission somewhere: the check of a call that names no scope (a request missing
  // its parentId), which its handler then refuses as invalid.
  allowedSomewhere(grants: readonly GrantRecord[], permission: string): boolean {
    return grants.some((grant) => roleAllows(grant.role, permission));
  }

  // Whether the principal holds the admin role on the global scope "*": what operator endpoints outside the API
  // (/metrics) ask of a caller.
  async isAdminEverywhere(principalId: string): Promise<boolean> {
    const grants = await this.grantsOf(principalId);
    return grants.some((grant) => grant.scope === "*" && grant.role === "admin");
  }

  private async load(principalId: string): Promise<readonly GrantRecord[]> {
    const epoch = this.epoch;
    const grants = Object.freeze(await this.store.grantsOf(principalId));
    if (epoch === this.epoch) {
      if (this.grants.size >= MAX_CACHED) this.grants.delete(this.grants.keys().next().value!);
      this.grants.set(principalId, grants);
    }
    return grants;
  }
}
