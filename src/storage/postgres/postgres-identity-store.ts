import type pg from "pg";
import type { AccessTokenRecord, ApiKeyRecord, GrantRecord, ServiceAccountRecord } from "../../identity/identity-model.js";
import type { CredentialCheck, IdentityStore } from "../identity-store.js";
import { accountFromRow, accountParams, apiKeyFromRow, apiKeyParams, grantFromRow, grantParams, tokenFromRow, tokenParams } from "../rows.js";
import type { AccountRow, ApiKeyRow, CheckColumns, GrantRow, TokenRow } from "../rows.js";
import { announce, changeOf, first, insert, noRowHas, rows, transaction } from "./sql.js";
import type { Queryable } from "./sql.js";

// Principals, credentials and grants in PostgreSQL. Every change of access bumps the generation and is announced in
// the same transaction, so every server drops its cached credentials and grants when it commits.
export class PostgresIdentityStore implements IdentityStore {
  constructor(private readonly pool: pg.Pool) {}

  private write<T>(change: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return transaction(this.pool, async (client) => {
      const result = await change(client);
      await client.query("UPDATE identity_generation SET generation = generation + 1 WHERE id = 1");
      await announce(client, changeOf.access());
      return result;
    });
  }

  private async insertGrantRow(db: Queryable, g: GrantRecord): Promise<GrantRecord> {
    const row = grantParams(g);
    const q = insert("identity_grants", row, "ON CONFLICT (principal_id, role, scope) DO NOTHING");
    await db.query(q.text, q.values);
    const stored = await first<GrantRow>(db, "SELECT * FROM identity_grants WHERE principal_id = $1 AND role = $2 AND scope = $3", [
      row.principal_id,
      row.role,
      row.scope,
    ]);
    return grantFromRow(stored!);
  }

  async hasNoAccounts(): Promise<boolean> {
    return (await first(this.pool, "SELECT 1 FROM identity_service_accounts LIMIT 1")) === null;
  }

  async createServiceAccount(a: ServiceAccountRecord, grants: readonly GrantRecord[]): Promise<void> {
    await this.write(async (client) => {
      const q = insert("identity_service_accounts", accountParams(a));
      await client.query(q.text, q.values);
      for (const g of grants) await this.insertGrantRow(client, g);
    });
  }

  async serviceAccountByClientId(clientId: string): Promise<ServiceAccountRecord | null> {
    if (noRowHas(clientId)) return null;
    const row = await first<AccountRow>(this.pool, "SELECT * FROM identity_service_accounts WHERE client_id = $1", [clientId]);
    return row === null ? null : accountFromRow(row);
  }

  async serviceAccount(idOrName: string): Promise<ServiceAccountRecord | null> {
    if (noRowHas(idOrName)) return null;
    const row = await first<AccountRow>(this.pool, "SELECT * FROM identity_service_accounts WHERE id = $1 OR name = $1", [idOrName]);
    return row === null ? null : accountFromRow(row);
  }

  async listServiceAccounts(): Promise<ServiceAccountRecord[]> {
    return (await rows<AccountRow>(this.pool, "SELECT * FROM identity_service_accounts ORDER BY created_at, id")).map(accountFromRow);
  }

  async revokeServiceAccount(id: string, now: number): Promise<boolean> {
    return this.write(async (client) => {
      const changed = ((await client.query("UPDATE identity_service_accounts SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL", [now, id])).rowCount ?? 0) > 0;
      if (changed) {
        await client.query("UPDATE identity_access_tokens SET revoked_at = $1 WHERE principal_id = $2 AND revoked_at IS NULL", [now, id]);
        await client.query("UPDATE identity_api_keys SET revoked_at = $1 WHERE principal_id = $2 AND revoked_at IS NULL", [now, id]);
      }
      return changed;
    });
  }

  async insertAccessToken(t: AccessTokenRecord): Promise<void> {
    // A new token changes no one's access: no generation bump.
    const q = insert("identity_access_tokens", tokenParams(t));
    await this.pool.query(q.text, q.values);
  }

  async accessTokenCheck(id: string): Promise<CredentialCheck<AccessTokenRecord> | null> {
    const r = await first<TokenRow & CheckColumns>(
      this.pool,
      `SELECT t.*, a.revoked_at AS account_revoked_at, g.generation
       FROM identity_access_tokens t
       JOIN identity_service_accounts a ON a.id = t.principal_id
       JOIN identity_generation g ON g.id = 1
       WHERE t.id = $1`,
      [id],
    );
    return r === null ? null : { record: tokenFromRow(r), accountRevokedAt: r.account_revoked_at, generation: r.generation };
  }

  async revokeAccessTokens(principalId: string, now: number): Promise<number> {
    return this.write(
      async (client) =>
        (await client.query("UPDATE identity_access_tokens SET revoked_at = $1 WHERE principal_id = $2 AND revoked_at IS NULL", [now, principalId])).rowCount ?? 0,
    );
  }

  async deleteExpiredAccessTokens(before: number): Promise<number> {
    return (await this.pool.query("DELETE FROM identity_access_tokens WHERE expires_at < $1", [before])).rowCount ?? 0;
  }

  async insertApiKey(k: ApiKeyRecord): Promise<void> {
    await this.write(async (client) => {
      const q = insert("identity_api_keys", apiKeyParams(k));
      await client.query(q.text, q.values);
    });
  }

  async apiKeyCheck(id: string): Promise<CredentialCheck<ApiKeyRecord> | null> {
    const r = await first<ApiKeyRow & CheckColumns>(
      this.pool,
      `SELECT k.*, a.revoked_at AS account_revoked_at, g.generation
       FROM identity_api_keys k
       JOIN identity_service_accounts a ON a.id = k.principal_id
       JOIN identity_generation g ON g.id = 1
       WHERE k.id = $1`,
      [id],
    );
    return r === null ? null : { record: apiKeyFromRow(r), accountRevokedAt: r.account_revoked_at, generation: r.generation };
  }

  async listApiKeys(principalId?: string): Promise<ApiKeyRecord[]> {
    const found =
      principalId === undefined
        ? await rows<ApiKeyRow>(this.pool, "SELECT * FROM identity_api_keys ORDER BY created_at, id")
        : await rows<ApiKeyRow>(this.pool, "SELECT * FROM identity_api_keys WHERE principal_id = $1 ORDER BY created_at, id", [principalId]);
    return found.map(apiKeyFromRow);
  }

  async revokeApiKey(id: string, now: number): Promise<boolean> {
    return this.write(
      async (client) => ((await client.query("UPDATE identity_api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL", [now, id])).rowCount ?? 0) > 0,
    );
  }

  async insertGrant(g: GrantRecord): Promise<GrantRecord> {
    return this.write((client) => this.insertGrantRow(client, g));
  }

  async deleteGrant(id: string): Promise<boolean> {
    return this.write(async (client) => ((await client.query("DELETE FROM identity_grants WHERE id = $1", [id])).rowCount ?? 0) > 0);
  }

  async grantsOf(principalId: string): Promise<GrantRecord[]> {
    return (await rows<GrantRow>(this.pool, "SELECT * FROM identity_grants WHERE principal_id = $1 ORDER BY created_at, id", [principalId])).map(grantFromRow);
  }

  async listGrants(principalId?: string): Promise<GrantRecord[]> {
    if (principalId !== undefined) return this.grantsOf(principalId);
    return (await rows<GrantRow>(this.pool, "SELECT * FROM identity_grants ORDER BY principal_id, created_at, id")).map(grantFromRow);
  }

  async generation(): Promise<number> {
    return (await first<{ generation: number }>(this.pool, "SELECT generation FROM identity_generation WHERE id = 1"))?.generation ?? 0;
  }
}
