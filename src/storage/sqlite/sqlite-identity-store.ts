import type Database from "better-sqlite3";
import type { AccessTokenRecord, ApiKeyRecord, GrantRecord, ServiceAccountRecord } from "../../identity/identity-model.js";
import type { CredentialCheck, IdentityStore } from "../identity-store.js";
import { accountFromRow, accountParams, apiKeyFromRow, apiKeyParams, grantFromRow, grantParams, tokenFromRow, tokenParams } from "../rows.js";
import type { AccountRow, ApiKeyRow, CheckColumns, GrantRow, TokenRow } from "../rows.js";

// better-sqlite3 is synchronous: each method runs to completion before its promise is returned, and a write with
// the generation bump is one transaction.
export class SqliteIdentityStore implements IdentityStore {
  private readonly bump: Database.Statement;
  private readonly tokenCheck: Database.Statement<[string], TokenRow & CheckColumns>;
  private readonly keyCheck: Database.Statement<[string], ApiKeyRow & CheckColumns>;

  constructor(private readonly db: Database.Database) {
    this.bump = db.prepare("UPDATE identity_generation SET generation = generation + 1 WHERE id = 1");
    // One read per call: the credential, its account's revocation and the access generation.
    this.tokenCheck = db.prepare(`
      SELECT t.*, a.revoked_at AS account_revoked_at, g.generation
      FROM identity_access_tokens t
      JOIN identity_service_accounts a ON a.id = t.principal_id
      JOIN identity_generation g ON g.id = 1
      WHERE t.id = ?`);
    this.keyCheck = db.prepare(`
      SELECT k.*, a.revoked_at AS account_revoked_at, g.generation
      FROM identity_api_keys k
      JOIN identity_service_accounts a ON a.id = k.principal_id
      JOIN identity_generation g ON g.id = 1
      WHERE k.id = ?`);
  }

  private write<T>(change: () => T): T {
    return this.db.transaction(() => {
      const result = change();
      this.bump.run();
      return result;
    })();
  }

  private insertGrantRow(g: GrantRecord): GrantRecord {
    const row = grantParams(g);
    this.db
      .prepare(
        "INSERT INTO identity_grants (id, principal_id, role, scope, created_at) VALUES (@id, @principal_id, @role, @scope, @created_at) ON CONFLICT (principal_id, role, scope) DO NOTHING",
      )
      .run(row);
    const stored = this.db
      .prepare("SELECT * FROM identity_grants WHERE principal_id = ? AND role = ? AND scope = ?")
      .get(row.principal_id, row.role, row.scope) as GrantRow;
    return grantFromRow(stored);
  }

  async hasNoAccounts(): Promise<boolean> {
    return this.db.prepare("SELECT 1 FROM identity_service_accounts LIMIT 1").get() === undefined;
  }

  async createServiceAccount(a: ServiceAccountRecord, grants: readonly GrantRecord[]): Promise<void> {
    this.write(() => {
      this.db
        .prepare(
          "INSERT INTO identity_service_accounts (id, name, client_id, secret_hash, created_at, revoked_at) VALUES (@id, @name, @client_id, @secret_hash, @created_at, @revoked_at)",
        )
        .run(accountParams(a));
      for (const g of grants) this.insertGrantRow(g);
    });
  }

  async serviceAccountByClientId(clientId: string): Promise<ServiceAccountRecord | null> {
    const row = this.db.prepare("SELECT * FROM identity_service_accounts WHERE client_id = ?").get(clientId) as AccountRow | undefined;
    return row === undefined ? null : accountFromRow(row);
  }

  async serviceAccount(idOrName: string): Promise<ServiceAccountRecord | null> {
    const row = this.db.prepare("SELECT * FROM identity_service_accounts WHERE id = ? OR name = ?").get(idOrName, idOrName) as AccountRow | undefined;
    return row === undefined ? null : accountFromRow(row);
  }

  async listServiceAccounts(): Promise<ServiceAccountRecord[]> {
    return (this.db.prepare("SELECT * FROM identity_service_accounts ORDER BY created_at, id").all() as AccountRow[]).map(accountFromRow);
  }

  async revokeServiceAccount(id: string, now: number): Promise<boolean> {
    return this.write(() => {
      const changed = this.db.prepare("UPDATE identity_service_accounts SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").run(now, id).changes > 0;
      if (changed) {
        this.db.prepare("UPDATE identity_access_tokens SET revoked_at = ? WHERE principal_id = ? AND revoked_at IS NULL").run(now, id);
        this.db.prepare("UPDATE identity_api_keys SET revoked_at = ? WHERE principal_id = ? AND revoked_at IS NULL").run(now, id);
      }
      return changed;
    });
  }

  async insertAccessToken(t: AccessTokenRecord): Promise<void> {
    // A new token changes no one's access: no generation bump.
    this.db
      .prepare(
        "INSERT INTO identity_access_tokens (id, principal_id, secret_hash, created_at, expires_at, revoked_at) VALUES (@id, @principal_id, @secret_hash, @created_at, @expires_at, @revoked_at)",
      )
      .run(tokenParams(t));
  }

  async accessTokenCheck(id: string): Promise<CredentialCheck<AccessTokenRecord> | null> {
    const r = this.tokenCheck.get(id);
    if (r === undefined) return null;
    return { record: tokenFromRow(r), accountRevokedAt: r.account_revoked_at, generation: r.generation };
  }

  async revokeAccessTokens(principalId: string, now: number): Promise<number> {
    return this.write(
      () => this.db.prepare("UPDATE identity_access_tokens SET revoked_at = ? WHERE principal_id = ? AND revoked_at IS NULL").run(now, principalId).changes,
    );
  }

  async deleteExpiredAccessTokens(before: number): Promise<number> {
    return this.db.prepare("DELETE FROM identity_access_tokens WHERE expires_at < ?").run(before).changes;
  }

  async insertApiKey(k: ApiKeyRecord): Promise<void> {
    this.write(() =>
      this.db
        .prepare(
          "INSERT INTO identity_api_keys (id, principal_id, workspace_id, secret_hash, created_at, revoked_at) VALUES (@id, @principal_id, @workspace_id, @secret_hash, @created_at, @revoked_at)",
        )
        .run(apiKeyParams(k)),
    );
  }

  async apiKeyCheck(id: string): Promise<CredentialCheck<ApiKeyRecord> | null> {
    const r = this.keyCheck.get(id);
    if (r === undefined) return null;
    return { record: apiKeyFromRow(r), accountRevokedAt: r.account_revoked_at, generation: r.generation };
  }

  async listApiKeys(principalId?: string): Promise<ApiKeyRecord[]> {
    const rows = (
      principalId === undefined
        ? this.db.prepare("SELECT * FROM identity_api_keys ORDER BY created_at, id").all()
        : this.db.prepare("SELECT * FROM identity_api_keys WHERE principal_id = ? ORDER BY created_at, id").all(principalId)
    ) as ApiKeyRow[];
    return rows.map(apiKeyFromRow);
  }

  async revokeApiKey(id: string, now: number): Promise<boolean> {
    return this.write(() => this.db.prepare("UPDATE identity_api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").run(now, id).changes > 0);
  }

  async insertGrant(g: GrantRecord): Promise<GrantRecord> {
    return this.write(() => this.insertGrantRow(g));
  }

  async deleteGrant(id: string): Promise<boolean> {
    return this.write(() => this.db.prepare("DELETE FROM identity_grants WHERE id = ?").run(id).changes > 0);
  }

  async grantsOf(principalId: string): Promise<GrantRecord[]> {
    return (this.db.prepare("SELECT * FROM identity_grants WHERE principal_id = ? ORDER BY created_at, id").all(principalId) as GrantRow[]).map(grantFromRow);
  }

  async listGrants(principalId?: string): Promise<GrantRecord[]> {
    if (principalId !== undefined) return this.grantsOf(principalId);
    return (this.db.prepare("SELECT * FROM identity_grants ORDER BY principal_id, created_at, id").all() as GrantRow[]).map(grantFromRow);
  }

  async generation(): Promise<number> {
    return (this.db.prepare("SELECT generation FROM identity_generation WHERE id = 1").pluck().get() as number | undefined) ?? 0;
  }
}
