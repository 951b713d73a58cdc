// Where a grant applies. A scope is a kind and an id: a KMS namespace (parentId), a service instance (vDC) or
// a workspace; "*" as the id means every scope of that kind, and the global scope "*" every scope of every kind.
export const scopeKinds = ["kms-namespace", "service-instance", "workspace"] as const;

export type ScopeKind = (typeof scopeKinds)[number];

export interface Scope {
  kind: ScopeKind;
  id: string;
}

// A grant's scope: a kind and id, or the global scope.
export type GrantScope = Scope | "*";

export function formatScope(scope: GrantScope): string {
  return scope === "*" ? "*" : `${scope.kind}:${scope.id}`;
}

// "*", "<kind>:*" or "<kind>:<id>"; throws with what is accepted.
export function parseScope(text: string): GrantScope {
  if (text === "*") return "*";
  const colon = text.indexOf(":");
  const kind = colon < 0 ? "" : text.slice(0, colon);
  const id = colon < 0 ? "" : text.slice(colon + 1);
  const known = scopeKinds.find((k) => k === kind);
  if (known === undefined || id === "") {
    throw new Error(`scope "${text}" is not one of "*", "<kind>:*" or "<kind>:<id>" with kind ${scopeKinds.join(", ")}`);
  }
  return { kind: known, id };
}

export function scopeCovers(grant: GrantScope, scope: Scope): boolean {
  return grant === "*" || (grant.kind === scope.kind && (grant.id === "*" || grant.id === scope.id));
}
