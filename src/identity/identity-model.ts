import type { Role } from "./roles.js";
import type { GrantScope } from "./scopes.js";

// A service account: the one kind of principal. Its id is the principal id that `owner` of a key and
// `createdBy` of a task record.
export interface ServiceAccountRecord {
  id: string;
  name: string;
  clientId: string;
  secretHash: Uint8Array;
  createdAt: number;
  revokedAt: number | null;
}

export interface AccessTokenRecord {
  id: string;
  principalId: string;
  secretHash: Uint8Array;
  createdAt: number;
  expiresAt: number;
  revokedAt: number | null;
}

// An API key belongs to one principal and one workspace: it is accepted only with that workspace's id in
// x-workspace-id.
export interface ApiKeyRecord {
  id: string;
  principalId: string;
  workspaceId: string;
  secretHash: Uint8Array;
  createdAt: number;
  revokedAt: number | null;
}

export interface GrantRecord {
  id: string;
  principalId: string;
  role: Role;
  scope: GrantScope;
  createdAt: number;
}

// One line of the audit trail. Never holds request or response bodies: no plaintext, ciphertext, AAD or secret.
export interface AuditRecord {
  at: number;
  // The principal id, or "anonymous" for a public method called without credentials.
  principal: string;
  // Full method name, e.g. "kms.v1.KeyManagerService/Encrypt".
  method: string;
  protocol: string;
  // The scope the access check was made on ("kms-namespace:team-a"), or "" for public methods.
  scope: string;
  // The resource the call named: its REST path with the request's ids filled in ("/v1/keys/<id>/versions/2").
  resource: string;
  // google.rpc.Code of the outcome; 0 for success.
  code: number;
  requestId: string;
}

export interface AuditFilter {
  since?: number;
  until?: number;
  principal?: string;
  // A prefix of the resource path, or a scope.
  resource?: string;
  limit: number;
}
