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

// Storage of principals, credentials and grants. Synchronous, like MasterKeyStore: the embedded store answers a
// credential check in microseconds on every call. Every write bumps the generation.
export interface IdentityStore {
  // Whether no service account was ever created (then the server bootstraps an admin).
  hasNoAccounts(): boolean;
  // Stores the account with its first grants, in one transaction.
  createServiceAccount(account: ServiceAccountRecord, grants: readonly GrantRecord[]): void;
  serviceAccountByClientId(clientId: string): ServiceAccountRecord | null;
  // By id or by name.
  serviceAccount(idOrName: string): ServiceAccountRecord | null;
  listServiceAccounts(): ServiceAccountRecord[];
  // Revokes the account and every token and API key of it. False when there is no such live account.
  revokeServiceAccount(id: string, now: number): boolean;

  insertAccessToken(token: AccessTokenRecord): void;
  accessTokenCheck(id: string): CredentialCheck<AccessTokenRecord> | null;
  revokeAccessTokens(principalId: string, now: number): number;
  // Forgets tokens that expired before `before`: they can never be accepted again.
  deleteExpiredAccessTokens(before: number): number;

  insertApiKey(key: ApiKeyRecord): void;
  apiKeyCheck(id: string): CredentialCheck<ApiKeyRecord> | null;
  listApiKeys(principalId?: string): ApiKeyRecord[];
  revokeApiKey(id: string, now: number): boolean;

  // Adds the grant unless the same one exists; returns the stored grant.
  insertGrant(grant: GrantRecord): GrantRecord;
  deleteGrant(id: string): boolean;
  grantsOf(principalId: string): GrantRecord[];
  listGrants(principalId?: string): GrantRecord[];
  generation(): number;
}

// The audit trail: appended to by every audited call, read by the operator command.
export interface AuditStore {
  // Stores the records in one transaction; throws when they could not be stored (the calls then fail).
  append(records: readonly AuditRecord[]): void;
  query(filter: AuditFilter): AuditRecord[];
}
