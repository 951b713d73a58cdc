import { printable } from "../errors/caller-text.js";
import type { Clock } from "../shared/clock.js";
import { CATALOG_ID, PLAIN_ID } from "../shared/ids.js";
import type { IdentityStore } from "../storage/identity-store.js";
import type { ApiKeyRecord, GrantRecord, ServiceAccountRecord } from "./identity-model.js";
import { isRole, roleNames } from "./roles.js";
import { formatScope, parseScope } from "./scopes.js";
import type { GrantScope, ScopeKind } from "./scopes.js";
import { issueSecret, newId } from "./secrets.js";

// The account's client secret, or an API key's text: shown once, when it is made.
export interface NewServiceAccount {
  account: ServiceAccountRecord;
  clientId: string;
  clientSecret: string;
}

export interface NewApiKey {
  key: ApiKeyRecord;
  text: string;
}

// A failure of an administrative request, with what to do about it (the operator command prints the message).
export class AdminError extends Error {}

const ACCOUNT_NAME = /^[a-z][a-z0-9-]{1,62}$/;

// The ids a scope of each kind can name, by the grammars the server checks them with (src/shared/ids.ts), so that a
// grant is refused when it can never match a call: a KMS namespace is a parentId, a service instance an id of the
// catalog (a grant may name one before the catalog has it), a workspace what an API key may belong to (createApiKey
// below).
const SCOPE_IDS: Record<ScopeKind, { regex: RegExp; rule: string }> = {
  "kms-namespace": { regex: PLAIN_ID, rule: "a KMS namespace (parentId) is 1-64 characters of [A-Za-z0-9._-]" },
  "service-instance": {
    regex: CATALOG_ID,
    rule: "a service instance id is 1-64 characters of [A-Za-z0-9._-], starting with a letter or digit",
  },
  workspace: { regex: PLAIN_ID, rule: "a workspace id is 1-64 characters of [A-Za-z0-9._-]" },
};

// Administration of principals, credentials and grants: what the bootstrap and the operator command do, on the
// same store the server reads.
export class IdentityAdmin {
  constructor(
    private readonly store: IdentityStore,
    private readonly clock: Clock,
    // Called after every change, so that the server this runs in drops its cached credentials and grants at once
    // (another process's server notices within a second: access-watcher.ts).
    private readonly changed: () => void = () => {},
  ) {}

  hasNoAccounts(): Promise<boolean> {
    return this.store.hasNoAccounts();
  }

  // Makes the account's records and secret without storing them (bootstrap writes the secret down first).
  async prepareServiceAccount(name: string): Promise<NewServiceAccount> {
    if (!ACCOUNT_NAME.test(name)) throw new AdminError(`account name "${name}" must match ${ACCOUNT_NAME.source}`);
    if ((await this.store.serviceAccount(name)) !== null) throw new AdminError(`a service account named "${name}" exists already`);
    const clientId = `sa-${newId(9)}`;
    const secret = issueSecret("client-secret", clientId);
    const account: ServiceAccountRecord = {
      id: `principal-${newId(9)}`,
      name,
      clientId,
      secretHash: secret.hash,
      createdAt: this.clock.now(),
      revokedAt: null,
    };
    return { account, clientId, clientSecret: secret.text };
  }

  // Stores a prepared account with grants of [role, scope], in one transaction.
  async storeServiceAccount(prepared: NewServiceAccount, grants: readonly [string, string][] = []): Promise<void> {
    const records = grants.map(([role, scope]) => this.grantRecord(prepared.account, role, scope));
    await this.store.createServiceAccount(prepared.account, records);
    this.changed();
  }

  async createServiceAccount(name: string, grants: readonly [string, string][] = []): Promise<NewServiceAccount> {
    const prepared = await this.prepareServiceAccount(name);
    await this.storeServiceAccount(prepared, grants);
    return prepared;
  }

  listServiceAccounts(): Promise<ServiceAccountRecord[]> {
    return this.store.listServiceAccounts();
  }

  // Revokes the account with every token and API key it has.
  async revokeServiceAccount(idOrName: string): Promise<ServiceAccountRecord> {
    const account = await this.account(idOrName);
    if (!(await this.store.revokeServiceAccount(account.id, this.clock.now()))) throw new AdminError(`service account ${account.name} is revoked already`);
    this.changed();
    return account;
  }

  async revokeTokens(idOrName: string): Promise<number> {
    const revoked = await this.store.revokeAccessTokens((await this.account(idOrName)).id, this.clock.now());
    this.changed();
    return revoked;
  }

  async createApiKey(idOrName: string, workspaceId: string): Promise<NewApiKey> {
    const account = await this.live(idOrName);
    if (!PLAIN_ID.test(workspaceId)) throw new AdminError(`workspace id "${workspaceId}" must be 1-64 characters of [A-Za-z0-9._-]`);
    const secret = issueSecret("api-key");
    const key: ApiKeyRecord = {
      id: secret.id,
      principalId: account.id,
      workspaceId,
      secretHash: secret.hash,
      createdAt: this.clock.now(),
      revokedAt: null,
    };
    await this.store.insertApiKey(key);
    this.changed();
    return { key, text: secret.text };
  }

  async listApiKeys(idOrName?: string): Promise<ApiKeyRecord[]> {
    return this.store.listApiKeys(idOrName === undefined ? undefined : (await this.account(idOrName)).id);
  }

  async revokeApiKey(id: string): Promise<void> {
    if (!(await this.store.revokeApiKey(id, this.clock.now()))) throw new AdminError(`no live API key has id ${id}`);
    this.changed();
  }

  async grant(idOrName: string, role: string, scope: string): Promise<GrantRecord> {
    const stored = await this.store.insertGrant(this.grantRecord(await this.live(idOrName), role, scope));
    this.changed();
    return stored;
  }

  private grantRecord(account: ServiceAccountRecord, role: string, scope: string): GrantRecord {
    if (!isRole(role)) throw new AdminError(`role "${role}" is not one of ${roleNames.join(", ")}`);
    let parsed: GrantScope;
    try {
      parsed = parseScope(scope);
    } catch (err) {
      throw new AdminError(printable((err as Error).message, 400));
    }
    if (parsed !== "*" && parsed.id !== "*" && !SCOPE_IDS[parsed.kind].regex.test(parsed.id)) {
      throw new AdminError(`scope "${printable(scope, 200)}" can never match: ${SCOPE_IDS[parsed.kind].rule}, or * for every one`);
    }
    return { id: `grant-${newId(9)}`, principalId: account.id, role, scope: parsed, createdAt: this.clock.now() };
  }

  async listGrants(idOrName?: string): Promise<GrantRecord[]> {
    return this.store.listGrants(idOrName === undefined ? undefined : (await this.account(idOrName)).id);
  }

  async revokeGrant(id: string): Promise<void> {
    if (!(await this.store.deleteGrant(id))) throw new AdminError(`no grant has id ${id}`);
    this.changed();
  }

  describeGrant(grant: GrantRecord): string {
    return `${grant.role} on ${formatScope(grant.scope)}`;
  }

  private async account(idOrName: string): Promise<ServiceAccountRecord> {
    const account = await this.store.serviceAccount(idOrName);
    if (account === null) throw new AdminError(`no service account has id or name "${idOrName}"`);
    return account;
  }

  private async live(idOrName: string): Promise<ServiceAccountRecord> {
    const account = await this.account(idOrName);
    if (account.revokedAt !== null) throw new AdminError(`service account ${account.name} is revoked`);
    return account;
  }
}
