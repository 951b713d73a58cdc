import type Database from "better-sqlite3";
import type {
  AccessTokenRecord,
  ApiKeyRecord,
  GrantRecord,
  ServiceAccountRecord,
} from "../../identity/identity-model.js";
import { isRole } from "../../identity/roles.js";
import { formatScope, parseScope } from "../../identity/scopes.js";
import type { CredentialCheck, IdentityStore } from "../identity-store.js";

interface AccountRow {
  id: string;
  name: string;
  client_id: string;
  secret_hash: Buffer;
  created_at: number;
  revoked_at: number | null;
}

interface TokenRow {
  id: string;
  principal_id: string;
  secret_hash: Buffer;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
  account_revoked_at: number | null;
  generation: number;
}

interface ApiKeyRow {
  id: string;
  principal_id: string;
  workspace_id: string;
  secret_hash: Buffer;
  created_at: number;
  revoked_at: number | null;
  account_revoked_at?: number | null;
  generation?: number;
}

interface GrantRow {
  id: string;
  principal_id: string;
  role: string;
  scope: string;
  created_at: number;
}

function accountFromRow(r: AccountRow): ServiceAccountRecord {
  return { id: r.id, name: r.name, clientId: r.client_id, secretHash: r.secret_hash, createdAt: r.created_at, revokedAt: r.revoked_at };
}

function apiKeyFromRow(r: ApiKeyRow): ApiKeyRecord {
  return {
    id: r.id,
    principalId: r.principal_id,
    workspaceId: r.workspace_id,
    secretHash: r.secret_hash,
    createdAt: r.created_at,
    revokedAt: r.revoked_at,
  };
}

function grantFromRow(r: GrantRow): GrantRecord {
  // Only this module writes the table, with values it checked; a row that fails these checks is corruption.
  if (!isRole(r.role)) throw new Error(`grant ${r.id} has an unknown role "${r.role}"`);
  return { id: r.id, principalId: r.principal_id, role: r.role, scope: parseScope(r.scope), createdAt: r.created_at };
}

export class SqliteIdentityStore implements IdentityStore {
  private readonly bump: Database.Statement;
  private readonly tokenCheck: Database.Statement<[string], TokenRow>;
  private readonly keyCheck: Database.Statement<[string], Required<ApiKeyRow>>;

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

  hasNoAccounts(): boolean {
    return this.db.prepare("SELECT 1 FROM identity_service_accounts LIMIT 1").get() === undefined;
  }

  createServiceAccount(a: ServiceAccountRecord, grants: readonly GrantRecord[]): void {
    this.write(() => {
      this.db
        .prepare("INSERT INTO identity_service_accounts (id, name, client_id, secret_hash, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)")
        .run(a.id, a.name, a.clientId, a.secretHash, a.createdAt, a.revokedAt);
      for (const g of grants) this.insertGrant(g);
    });
  }

  serviceAccountByClientId(clientId: string): ServiceAccountRecord | null {
    const row = this.db.prepare("SELECT * FROM identity_service_accounts WHERE client_id = ?").get(clientId) as AccountRow | undefined;
    return row === undefined ? null : accountFromRow(row);
  }

  serviceAccount(idOrName: string): ServiceAccountRecord | null {
    const row = this.db.prepare("SELECT * FROM identity_service_accounts WHERE id = ? OR name = ?").get(idOrName, idOrName) as AccountRow | undefined;
    return row === undefined ? null : accountFromRow(row);
  }

  listServiceAccounts(): ServiceAccountRecord[] {
    return (this.db.prepare("SELECT * FROM identity_service_accounts ORDER BY created_at, id").all() as AccountRow[]).map(accountFromRow);
  }

  revokeServiceAccount(id: string, now: number): boolean {
    return this.write(() => {
      const changed = this.db.prepare("UPDATE identity_service_accounts SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").run(now, id).changes > 0;
      if (changed) {
        this.db.prepare("UPDATE identity_access_tokens SET revoked_at = ? WHERE principal_id = ? AND revoked_at IS NULL").run(now, id);
        this.db.prepare("UPDATE identity_api_keys SET revoked_at = ? WHERE principal_id = ? AND revoked_at IS NULL").run(now, id);
      }
      return changed;
    });
  }

  insertAccessToken(t: AccessTokenRecord): void {
    // A new token changes no one's access: no generation bump.
    this.db
      .prepare("INSERT INTO identity_access_tokens (id, principal_id, secret_hash, created_at, expires_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)")
      .run(t.id, t.principalId, t.secretHash, t.createdAt, t.expiresAt, t.revokedAt);
  }

  accessTokenCheck(id: string): CredentialCheck<AccessTokenRecord> | null {
    const r = this.tokenCheck.get(id);
    if (r === undefined) return null;
    return {
      record: { id: r.id, principalId: r.principal_id, secretHash: r.secret_hash, createdAt: r.created_at, expiresAt: r.expires_at, revokedAt: r.revoked_at },
      accountRevokedAt: r.account_revoked_at,
      generation: r.generation,
    };
  }

  revokeAccessTokens(principalId: string, now: number): number {
    return this.write(
      () => this.db.prepare("UPDATE identity_access_tokens SET revoked_at = ? WHERE principal_id = ? AND revoked_at IS NULL").run(now, principalId).changes,
    );
  }

  deleteExpiredAccessTokens(before: number): number {
    return this.db.prepare("DELETE FROM identity_access_tokens WHERE expires_at < ?").run(before).changes;
  }

  insertApiKey(k: ApiKeyRecord): void {
    this.write(() =>
      this.db
        .prepare("INSERT INTO identity_api_keys (id, principal_id, workspace_id, secret_hash, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)")
        .run(k.id, k.principalId, k.workspaceId, k.secretHash, k.createdAt, k.revokedAt),
    );
  }

  apiKeyCheck(id: string): CredentialCheck<ApiKeyRecord> | null {
    const r = this.keyCheck.get(id);
    if (r === undefined) return null;
    return { record: apiKeyFromRow(r), accountRevokedAt: r.account_revoked_at, generation: r.generation };
  }

  listApiKeys(principalId?: string): ApiKeyRecord[] {
    const rows = (
      principalId === undefined
        ? this.db.prepare("SELECT * FROM identity_api_keys ORDER BY created_at, id").all()
        : this.db.prepare("SELECT * FROM identity_api_keys WHERE principal_id = ? ORDER BY created_at, id").all(principalId)
    ) as ApiKeyRow[];
    return rows.map(apiKeyFromRow);
  }

  revokeApiKey(id: string, now: number): boolean {
    return this.write(() => this.db.prepare("UPDATE identity_api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").run(now, id).changes > 0);
  }

  insertGrant(g: GrantRecord): GrantRecord {
    const scope = formatScope(g.scope);
    return this.write(() => {
      this.db
        .prepare("INSERT INTO identity_grants (id, principal_id, role, scope, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (principal_id, role, scope) DO NOTHING")
        .run(g.id, g.principalId, g.role, scope, g.createdAt);
      const row = this.db
        .prepare("SELECT * FROM identity_grants WHERE principal_id = ? AND role = ? AND scope = ?")
        .get(g.principalId, g.role, scope) as GrantRow;
      return grantFromRow(row);
    });
  }

  deleteGrant(id: string): boolean {
    return this.write(() => this.db.prepare("DELETE FROM identity_grants WHERE id = ?").run(id).changes > 0);
  }

  grantsOf(principalId: string): GrantRecord[] {
    return (this.db.prepare("SELECT * FROM identity_grants WHERE principal_id = ? ORDER BY created_at, id").all(principalId) as GrantRow[]).map(grantFromRow);
  }

  listGrants(principalId?: string): GrantRecord[] {
    if (principalId !== undefined) return this.grantsOf(principalId);
    return (this.db.prepare("SELECT * FROM identity_grants ORDER BY principal_id, created_at, id").all() as GrantRow[]).map(grantFromRow);
  }

  generation(): number {
    return (this.db.prepare("SELECT generation FROM identity_generation WHERE id = 1").pluck().get() as number | undefined) ?? 0;
  }
}
