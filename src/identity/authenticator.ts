import type { Logger } from "pino";
import { printable } from "../errors/caller-text.js";
import type { Credentials } from "../pipeline/call.js";
import type { ErrorDomain } from "../errors/reasons.js";
import type { Clock } from "../shared/clock.js";
import type { IdentityStore } from "../storage/identity-store.js";
import type { FailureCounts } from "../ratelimit/failure-counts.js";
import { FailureLimiter } from "./failure-limiter.js";
import { apiKeyOfAnotherWorkspace, tooManyFailedAuthentications, unauthenticated } from "./identity-errors.js";
import { hashSecret, idOf, issueSecret, secretMatches } from "./secrets.js";

export interface AuthenticatorSettings {
  tokenTtlMs: number;
  failuresPerMinute: number;
  // Where failures are counted (the rate limits' store, shared when it is Redis); none: this process's memory.
  failureCounts?: FailureCounts;
  // Where an address or client id that became blocked is reported, at warn (the server's logger). None: not reported.
  logger?: Pick<Logger, "warn">;
}

// Block notices a minute, at most: each block took more than a minute's limit of failures to earn, but a guesser
// with many addresses (an IPv6 prefix) earns many; beyond this they are counted and the count logged with the next
// notice.
const MAX_BLOCK_NOTICES_PER_MINUTE = 100;

// The credential prefixes (secrets.ts): a client id that starts with one is a secret sent in the wrong field.
const CREDENTIAL_PREFIX = /^cp(cs|at|ak)\./;

// A verified credential as the per-call check needs it; cached by id until access changes.
interface KnownCredential {
  principalId: string;
  hash: Uint8Array;
  // Null for API keys, which do not expire.
  expiresAt: number | null;
  revoked: boolean;
  workspaceId: string | null;
}

type CredentialKind = "access-token" | "api-key";

// Credentials read from the store for one call: null for one the store does not hold, undefined when not read.
type Loaded = Record<CredentialKind, KnownCredential | null | undefined>;

export interface IssuedToken {
  text: string;
  expiresInSeconds: number;
  principalId: string;
}

// Bounds the cache of known credentials; the oldest goes first and is read again from the store when used.
const MAX_CACHED = 100_000;

// A hash to compare against when the client id is unknown, so that a wrong client id takes as long as a wrong
// secret.
const NO_ACCOUNT_HASH = hashSecret("no such account");

// Decides who a caller is from the credentials it sent: an access token in Authorization, an API key in x-api-key
// (with the workspace it belongs to in x-workspace-id), or both, which must then be one principal's. Issues the
// tokens too. Failed attempts are counted per source address (and per client id at ServiceAuth).
export class Authenticator {
  private readonly known = { "access-token": new Map<string, KnownCredential>(), "api-key": new Map<string, KnownCredential>() };
  // The presented texts whose hash matched a known credential, by the whole text: a caller sends the same token on
  // every call, and parsing its id and hashing it again were most of what authentication cost per call (about 2 µs,
  // bench/README.md). A text that differs from a verified one in any character is not found here and is checked in
  // full. Filled only with credentials of the current epoch, and cleared with `known`.
  private readonly verified = { "access-token": new Map<string, KnownCredential>(), "api-key": new Map<string, KnownCredential>() };
  private readonly bySource: FailureLimiter;
  private readonly byClientId: FailureLimiter;
  private epoch = 0;
  private readonly notices = { windowStart: 0, count: 0, unlogged: 0 };

  constructor(
    private readonly store: IdentityStore,
    private readonly clock: Clock,
    private readonly settings: AuthenticatorSettings,
  ) {
    this.bySource = new FailureLimiter(
      settings.failuresPerMinute,
      "auth-failures:address",
      (address, seconds) =>
        this.reportBlock(
          { address: printable(address, 64) },
          `address ${printable(address, 64)} made more than ${settings.failuresPerMinute} failed authentications in a minute: its failures are refused for ${seconds} s (valid credentials from it still pass)`,
          seconds,
        ),
      settings.failureCounts,
    );
    this.byClientId = new FailureLimiter(settings.failuresPerMinute, "auth-failures:client-id", (clientId, seconds) => {
      // Bounded (service_auth refuses a client id over 128 characters before it is counted) and escaped; never a
      // secret, even one pasted into client_id.
      const shown = CREDENTIAL_PREFIX.test(clientId) ? "(a credential sent as client_id, not shown)" : printable(clientId, 128);
      this.reportBlock(
        { clientId: shown },
        `client id ${shown} had more than ${settings.failuresPerMinute} failed authentications in a minute: it is refused for ${seconds} s, even with its right secret`,
        seconds,
      );
    }, settings.failureCounts);
  }

  // One warn line per block (FailureLimiter calls once per block, never per failure), at most
  // MAX_BLOCK_NOTICES_PER_MINUTE a minute.
  private reportBlock(who: Record<string, string>, message: string, seconds: number): void {
    const logger = this.settings.logger;
    if (logger === undefined) return;
    const now = this.clock.now();
    const n = this.notices;
    if (now - n.windowStart >= 60_000) {
      n.windowStart = now;
      n.count = 0;
    }
    if (n.count >= MAX_BLOCK_NOTICES_PER_MINUTE) {
      if (n.unlogged++ === 0) {
        logger.warn({ limit: MAX_BLOCK_NOTICES_PER_MINUTE }, `more than ${MAX_BLOCK_NOTICES_PER_MINUTE} addresses or client ids were blocked for failed authentications within a minute: further blocks are counted, not logged one by one`);
      }
      return;
    }
    n.count++;
    const unlogged = n.unlogged;
    n.unlogged = 0;
    logger.warn(
      { ...who, failuresPerMinute: this.settings.failuresPerMinute, blockedSeconds: seconds, ...(unlogged > 0 ? { unloggedBlocksBefore: unlogged } : {}) },
      `failed authentications: ${message}`,
    );
  }

  // Forgets every cached credential: access changed in the store. A read from the store in flight meanwhile is
  // not cached (`epoch`): it may have seen the store before the change.
  clear(): void {
    this.known["access-token"].clear();
    this.known["api-key"].clear();
    this.verified["access-token"].clear();
    this.verified["api-key"].clear();
    this.epoch++;
  }

  // The principal id of the caller; throws UNAUTHENTICATED (or PERMISSION_DENIED for an API key of another
  // workspace). A failure is counted against the caller's address, and once the address has failed too often it is
  // answered RESOURCE_EXHAUSTED instead (asynchronously: the count is the limiter's). Valid credentials are never
  // refused for their address, so that callers sharing an address with a guesser are not locked out; the address is
  // read only on failure. Synchronous when the credentials are cached; a credential not seen since access last
  // changed is read from the store first.
  authenticate(credentials: Credentials, caller: { readonly peerAddress: string }, domain: ErrorDomain): string | Promise<string> {
    const loading = this.loadUnknown(credentials);
    if (loading !== null) return loading.then((loaded) => this.decide(credentials, caller, domain, loaded));
    return this.decide(credentials, caller, domain, null);
  }

  private decide(
    credentials: Credentials,
    caller: { readonly peerAddress: string },
    domain: ErrorDomain,
    loaded: Loaded | null,
  ): string | Promise<never> {
    let principal: string | null = null;
    if (credentials.token !== undefined) {
      const token = this.check("access-token", credentials.token, loaded);
      if (typeof token === "string") return this.failed(caller.peerAddress, domain, `the access token in Authorization ${token}`);
      principal = token.principalId;
    }
    if (credentials.apiKey !== undefined) {
      if (credentials.workspaceId === undefined) {
        return this.failed(caller.peerAddress, domain, "x-api-key was sent without x-workspace-id, the workspace the key belongs to");
      }
      const key = this.check("api-key", credentials.apiKey, loaded);
      if (typeof key === "string") return this.failed(caller.peerAddress, domain, `the API key in x-api-key ${key}`);
      if (key.workspaceId !== credentials.workspaceId) throw apiKeyOfAnotherWorkspace(domain);
      if (principal !== null && principal !== key.principalId) {
        return this.failed(caller.peerAddress, domain, "the access token and the API key belong to two different principals");
      }
      principal = key.principalId;
    }
    if (principal === null) {
      // Not a guess: nothing to count.
      throw unauthenticated(
        domain,
        credentials.workspaceId !== undefined
          ? "the call carries x-workspace-id but no credentials: send Authorization: Bearer <token> (and x-api-key where required)"
          : "the call carries no credentials: send Authorization: Bearer <token>, a token from POST /public/v2/service_auth",
      );
    }
    return principal;
  }

  // Reads the presented credentials that are not cached from the store; null (allocating nothing, as on every call
  // with known credentials) when there are none to read.
  private loadUnknown(credentials: Credentials): Promise<Loaded> | null {
    const tokenId = this.unknownId("access-token", credentials.token);
    const keyId = this.unknownId("api-key", credentials.apiKey);
    if (tokenId === null && keyId === null) return null;
    return Promise.all([tokenId === null ? undefined : this.load("access-token", tokenId), keyId === null ? undefined : this.load("api-key", keyId)]).then(
      ([token, key]) => ({ "access-token": token, "api-key": key }),
    );
  }

  private unknownId(kind: CredentialKind, presented: string | undefined): string | null {
    if (presented === undefined || this.verified[kind].has(presented)) return null;
    const id = idOf(kind, presented);
    return id !== null && !this.known[kind].has(id) ? id : null;
  }

  // Exchanges a service account's client id and secret for a new access token. A client id that failed too often is
  // refused for a while even with the right secret, so that its secret cannot be guessed from many addresses; an
  // address that failed too often is refused its failures only, like authenticate().
  async issueToken(clientId: string, clientSecret: string, source: string, domain: ErrorDomain): Promise<IssuedToken> {
    const clientBlocked = await this.byClientId.blockedFor(clientId);
    if (clientBlocked > 0) throw tooManyFailedAuthentications(domain, "client id", clientBlocked);
    const account = clientId.length <= 200 ? await this.store.serviceAccountByClientId(clientId) : null;
    const matches = secretMatches(clientSecret, account?.secretHash ?? NO_ACCOUNT_HASH);
    if (account === null || !matches || account.revokedAt !== null) {
      const [bySource, byClient] = await Promise.all([this.bySource.fail(source), this.byClientId.fail(clientId)]);
      // The client id first: from then on it is refused before its secret is checked, and says so alike.
      if (byClient > 0) throw tooManyFailedAuthentications(domain, "client id", byClient);
      if (bySource > 0) throw tooManyFailedAuthentications(domain, "address", bySource);
      throw unauthenticated(domain, "client_id or client_secret is wrong, or the service account was revoked");
    }
    const now = this.clock.now();
    const secret = issueSecret("access-token");
    await this.store.insertAccessToken({
      id: secret.id,
      principalId: account.id,
      secretHash: secret.hash,
      createdAt: now,
      expiresAt: now + this.settings.tokenTtlMs,
      revokedAt: null,
    });
    return { text: secret.text, expiresInSeconds: Math.floor(this.settings.tokenTtlMs / 1000), principalId: account.id };
  }

  // The credential, or what is wrong with it (completing "the access token ... <is not valid>").
  private check(kind: CredentialKind, presented: string, loaded: Loaded | null): KnownCredential | string {
    const credential = this.verified[kind].get(presented) ?? this.verify(kind, presented, loaded);
    if (typeof credential === "string") return credential;
    if (credential.revoked) return "has been revoked";
    if (credential.expiresAt !== null && credential.expiresAt <= this.clock.now()) {
      return "has expired: get a new one from POST /public/v2/service_auth";
    }
    return credential;
  }

  // Checks a presented text not verified before against its credential's hash, and remembers it when it matches.
  private verify(kind: CredentialKind, presented: string, loaded: Loaded | null): KnownCredential | string {
    const id = idOf(kind, presented);
    if (id === null) return "is not one the server issued";
    const cached = this.known[kind].get(id);
    const credential = cached ?? loaded?.[kind] ?? null;
    if (credential === null || !secretMatches(presented, credential.hash)) return "is not valid";
    // Not one read in an epoch that has since ended (load did not cache it): it is checked again next time.
    if (cached !== undefined) {
      const verified = this.verified[kind];
      if (verified.size >= MAX_CACHED) verified.delete(verified.keys().next().value!);
      verified.set(presented, credential);
    }
    return credential;
  }

  private async load(kind: CredentialKind, id: string): Promise<KnownCredential | null> {
    const epoch = this.epoch;
    const found = kind === "access-token" ? await this.store.accessTokenCheck(id) : await this.store.apiKeyCheck(id);
    if (found === null) return null;
    const r = found.record;
    const credential: KnownCredential = {
      principalId: r.principalId,
      hash: r.secretHash,
      expiresAt: "expiresAt" in r ? r.expiresAt : null,
      revoked: r.revokedAt !== null || found.accountRevokedAt !== null,
      workspaceId: "workspaceId" in r ? r.workspaceId : null,
    };
    if (epoch !== this.epoch) return credential;
    const known = this.known[kind];
    if (known.size >= MAX_CACHED) known.delete(known.keys().next().value!);
    known.set(id, credential);
    return credential;
  }

  private async failed(source: string, domain: ErrorDomain, what: string): Promise<never> {
    const blocked = await this.bySource.fail(source);
    if (blocked > 0) throw tooManyFailedAuthentications(domain, "address", blocked);
    throw unauthenticated(domain, what);
  }
}
