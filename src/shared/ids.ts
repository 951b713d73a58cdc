// The grammars of ids that more than one part of the server checks, so that one cannot drift from the other: a
// grant (src/identity/identity-admin.ts) must name a scope the calls it is for can have.

// 1-64 characters of [A-Za-z0-9._-]: a KMS namespace, a key's parentId (CONTRACT section 5), and a workspace id.
export const PLAIN_ID = /^[A-Za-z0-9._-]{1,64}$/;

// The same, starting with a letter or digit: every id and key of the catalog, service instances (vDCs) among them.
export const CATALOG_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
