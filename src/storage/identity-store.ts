import type {
  AccessTokenRecord,
  ApiKeyRecord,
  AuditFilter,
  AuditRecord,
  GrantRecord,
  ServiceAccountRecord,
} from "../identity/identity-model.js";

// What a call's credential check reads: the credential, whether its account is revoked, and the access
// generation (which changes with every grant or revocation, so that cached grants are dropped).
export interface CredentialCheck<T> {
  record: T;
  accountRevokedAt: number | null;
  generation: number;
}

// Storage of principals, credentials and grants. Every write bumps the generation. Asynchronous, as every store
// (PostgreSQL answers over the network); the server reads it only when its caches miss (authenticator.ts,
// access-policy.ts), so a call with a known credential does not wait for it.
export interface IdentityStore {
  // Whether no service account was ever created (then the server bootstraps an admin).
  hasNoAccounts(): Promise<boolean>;
  // Stores the account with its first grants, in one transaction.
  createServiceAccount(account: ServiceAccountRecord, grants: readonly GrantRecord[]): Promise<void>;
  serviceAccountByClientId(clientId: string): Promise<ServiceAccountRecord | null>;
  // By id or by name.
  serviceAccount(idOrName: string): Promise<ServiceAccountRecord | null>;
  listServiceAccounts(): Promise<ServiceAccountRecord[]>;
  // Revokes the account and every token and API key of it. False when there is no such live account.
  revokeServiceAccount(id: string, now: number): Promise<boolean>;

  insertAccessToken(token: AccessTokenRecord): Promise<void>;
  accessTokenCheck(id: string): Promise<CredentialCheck<AccessTokenRecord> | null>;
  revokeAccessTokens(principalId: string, now: number): Promise<number>;
  // Forgets tokens that expired before `before`: they can never be accepted again.
  deleteExpiredAccessTokens(before: number): Promise<number>;

  insertApiKey(key: ApiKeyRecord): Promise<void>;
  apiKeyCheck(id: string): Promise<CredentialCheck<ApiKeyRecord> | null>;
  listApiKeys(principalId?: string): Promise<ApiKeyRecord[]>;
  revokeApiKey(id: string, now: number): Promise<boolean>;

  // Adds the grant unless the same one exists; returns the stored grant.
  insertGrant(grant: GrantRecord): Promise<GrantRecord>;
  deleteGrant(id: string): Promise<boolean>;
  grantsOf(principalId: string): Promise<GrantRecord[]>;
  listGrants(principalId?: string): Promise<GrantRecord[]>;
  generation(): Promise<number>;
}

// The audit trail: appended to by every audited call, read by the operator command.
export interface AuditStore {
  // Stores the records in one transaction; throws when they could not be stored (the calls then fail).
  append(records: readonly AuditRecord[]): Promise<void>;
  query(filter: AuditFilter): Promise<AuditRecord[]>;
  // Deletes up to `limit` of the oldest batches whose every record is older than `before` (ms since the epoch);
  // returns how many it deleted, so that a caller deletes a long trail a bounded piece at a time.
  prune(before: number, limit: number): Promise<number>;
}
