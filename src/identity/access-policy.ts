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
// principal until access changes (clear()).
export class AccessPolicy {
  private readonly grants = new Map<string, readonly GrantRecord[]>();

  constructor(private readonly store: IdentityStore) {}

  clear(): void {
    this.grants.clear();
  }

  decide(principalId: string, permission: string, scope: Scope): AccessDecision {
    let covered = false;
    for (const grant of this.grantsOf(principalId)) {
      if (!scopeCovers(grant.scope, scope)) continue;
      if (roleAllows(grant.role, permission)) return "allowed";
      covered = true;
    }
    return covered ? "denied" : "hidden";
  }

  // Whether any grant of the principal allows the permission somewhere: the check of a call that names no scope
  // (a request missing its parentId), which its handler then refuses as invalid.
  allowedSomewhere(principalId: string, permission: string): boolean {
    return this.grantsOf(principalId).some((grant) => roleAllows(grant.role, permission));
  }

  // Whether the principal holds the admin role on the global scope "*": what operator endpoints outside the API
  // (/metrics) ask of a caller.
  isAdminEverywhere(principalId: string): boolean {
    return this.grantsOf(principalId).some((grant) => grant.scope === "*" && grant.role === "admin");
  }

  private grantsOf(principalId: string): readonly GrantRecord[] {
    let grants = this.grants.get(principalId);
    if (grants === undefined) {
      grants = this.store.grantsOf(principalId);
      if (this.grants.size >= MAX_CACHED) this.grants.delete(this.grants.keys().next().value!);
      this.grants.set(principalId, grants);
    }
    return grants;
  }
}
