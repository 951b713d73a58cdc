import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DomainError } from "../../src/errors/domain-error.js";
import { Authenticator } from "../../src/identity/authenticator.js";
import { IdentityAdmin } from "../../src/identity/identity-admin.js";
import type { Credentials } from "../../src/pipeline/call.js";
import { openDatabase } from "../../src/storage/sqlite/database.js";
import { SqliteIdentityStore } from "../../src/storage/sqlite/sqlite-identity-store.js";
import { FakeClock } from "../support/fake-clock.js";
import { tempDir } from "../support/temp-dir.js";

// The authenticator against the real embedded store, with a clock moved by hand.

const HOUR = 3600_000;
const caller = { peerAddress: "192.0.2.7" };
const other = { peerAddress: "192.0.2.8" };

function credentials(c: Partial<Credentials>): Credentials {
  return { token: undefined, apiKey: undefined, workspaceId: undefined, ...c };
}

// The refusal of a call, whether thrown at once or as a rejected promise.
async function refusal(run: () => unknown): Promise<DomainError> {
  try {
    await run();
  } catch (err) {
    if (err instanceof DomainError) return err;
    throw err;
  }
  throw new Error("not refused");
}

describe("Authenticator", () => {
  let dir: ReturnType<typeof tempDir>;
  let db: ReturnType<typeof openDatabase>;
  let clock: FakeClock;
  let store: SqliteIdentityStore;
  let admin: IdentityAdmin;
  let auth: Authenticator;

  beforeEach(() => {
    dir = tempDir();
    db = openDatabase(dir.path, "upgrade");
    clock = new FakeClock();
    store = new SqliteIdentityStore(db);
    auth = new Authenticator(store, clock, { tokenTtlMs: HOUR, failuresPerMinute: 3 });
    admin = new IdentityAdmin(store, clock, () => auth.clear());
  });
  afterEach(() => {
    db.close();
    dir.remove();
  });

  async function token(name = "app"): Promise<{ text: string; principal: string; clientId: string; secret: string }> {
    const account = await admin.createServiceAccount(name);
    const issued = await auth.issueToken(account.clientId, account.clientSecret, caller.peerAddress, "kms");
    return { text: issued.text, principal: account.account.id, clientId: account.clientId, secret: account.clientSecret };
  }

  it("accepts a token with and without its Bearer prefix having been stripped, until it expires", async () => {
    const t = await token();
    expect(await auth.authenticate(credentials({ token: t.text }), caller, "kms")).toBe(t.principal);
    clock.advance(HOUR - 1);
    expect(await auth.authenticate(credentials({ token: t.text }), caller, "kms")).toBe(t.principal);
    clock.advance(1);
    const expired = await refusal(() => auth.authenticate(credentials({ token: t.text }), caller, "kms"));
    expect(expired.detail).toMatchObject({ code: "unauthenticated", reason: "UNAUTHENTICATED" });
    expect(expired.message).toContain("has expired");
    expect(expired.message).not.toContain(t.text.split(".")[2]);
  });

  it("refuses a token whose secret part was changed, a token of another form, and a revoked one", async () => {
    const t = await token();
    const tampered = `${t.text.slice(0, -1)}${t.text.endsWith("A") ? "B" : "A"}`;
    expect((await refusal(() => auth.authenticate(credentials({ token: tampered }), caller, "kms"))).message).toContain("is not valid");
    // Once the real token has been verified (and is remembered by its text), a changed one is still checked in full.
    expect(await auth.authenticate(credentials({ token: t.text }), caller, "kms")).toBe(t.principal);
    // (From another address: this test's address has failures to spare for three only.)
    expect((await refusal(() => auth.authenticate(credentials({ token: tampered }), other, "kms"))).message).toContain("is not valid");
    const shortened = t.text.slice(0, -1);
    expect((await refusal(() => auth.authenticate(credentials({ token: shortened }), other, "kms"))).message).toContain("is not valid");
    expect((await refusal(() => auth.authenticate(credentials({ token: "garbage" }), caller, "kms"))).message).toContain("not one the server issued");
    await admin.revokeTokens("app");
    expect((await refusal(() => auth.authenticate(credentials({ token: t.text }), caller, "kms"))).message).toContain("revoked");
  });

  it("takes an API key only with its own workspace, and with a token only of the same principal", async () => {
    const t = await token();
    const key = await admin.createApiKey("app", "ws-1");
    expect(await auth.authenticate(credentials({ apiKey: key.text, workspaceId: "ws-1" }), caller, "compute")).toBe(t.principal);
    expect(await auth.authenticate(credentials({ token: t.text, apiKey: key.text, workspaceId: "ws-1" }), caller, "compute")).toBe(t.principal);
    const wrongWorkspace = await refusal(() => auth.authenticate(credentials({ apiKey: key.text, workspaceId: "ws-2" }), caller, "compute"));
    expect(wrongWorkspace.detail).toMatchObject({ code: "permission_denied", reason: "API_KEY_WORKSPACE_MISMATCH" });
    const noWorkspace = await refusal(() => auth.authenticate(credentials({ apiKey: key.text }), caller, "compute"));
    expect(noWorkspace.detail.code).toBe("unauthenticated");
    const otherToken = await token("other-app");
    const mixed = await refusal(() => auth.authenticate(credentials({ token: otherToken.text, apiKey: key.text, workspaceId: "ws-1" }), caller, "compute"));
    expect(mixed.message).toContain("two different principals");
    await admin.revokeApiKey(key.key.id);
    expect((await refusal(() => auth.authenticate(credentials({ apiKey: key.text, workspaceId: "ws-1" }), caller, "compute"))).message).toContain("revoked");
  });

  it("answers 429 to an address's failures past the limit, but still lets its valid credentials in", async () => {
    const t = await token();
    for (let i = 0; i < 3; i++) {
      expect((await refusal(() => auth.authenticate(credentials({ token: "cpat.x.y" }), caller, "kms"))).detail.code).toBe("unauthenticated");
    }
    const limited = await refusal(() => auth.authenticate(credentials({ token: "cpat.x.y" }), caller, "kms"));
    expect(limited.detail).toMatchObject({ code: "resource_exhausted", reason: "AUTHENTICATION_RATE_LIMITED" });
    expect(await auth.authenticate(credentials({ token: t.text }), caller, "kms")).toBe(t.principal);
    // Another address is counted on its own.
    expect((await refusal(() => auth.authenticate(credentials({ token: "cpat.x.y" }), other, "kms"))).detail.code).toBe("unauthenticated");
  });

  it("refuses a client id that failed too often even with the right secret, and says nothing about which part was wrong", async () => {
    const account = await admin.createServiceAccount("target");
    const unknown = await refusal(() => auth.issueToken("sa-nobody", account.clientSecret, other.peerAddress, "compute"));
    const wrong = await refusal(() => auth.issueToken(account.clientId, "cpcs.x.y", other.peerAddress, "compute"));
    expect(unknown.message).toBe(wrong.message);
    await refusal(() => auth.issueToken(account.clientId, "cpcs.x.y", caller.peerAddress, "compute"));
    const third = await refusal(() => auth.issueToken(account.clientId, "cpcs.x.y", "192.0.2.9", "compute"));
    expect(third.detail.code).toBe("unauthenticated");
    // The fourth failure in a minute, each from another address, is one too many for the client id.
    const fourth = await refusal(() => auth.issueToken(account.clientId, "cpcs.x.y", "192.0.2.11", "compute"));
    expect(fourth.detail).toMatchObject({ code: "resource_exhausted", reason: "AUTHENTICATION_RATE_LIMITED" });
    const blocked = await refusal(() => auth.issueToken(account.clientId, account.clientSecret, "192.0.2.10", "compute"));
    expect(blocked.detail).toMatchObject({ code: "resource_exhausted", reason: "AUTHENTICATION_RATE_LIMITED" });
  });

  it("refuses the tokens of a revoked account, and a revoked account's secret", async () => {
    const t = await token();
    await admin.revokeServiceAccount("app");
    expect((await refusal(() => auth.authenticate(credentials({ token: t.text }), caller, "kms"))).message).toContain("revoked");
    expect((await refusal(() => auth.issueToken(t.clientId, t.secret, other.peerAddress, "compute"))).detail.code).toBe("unauthenticated");
  });

  it("answers a cached credential synchronously, reads an unknown one from the store, and does not cache a read that a clear() overtook", async () => {
    const t = await token();
    const first = auth.authenticate(credentials({ token: t.text }), caller, "kms");
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toBe(t.principal);
    expect(auth.authenticate(credentials({ token: t.text }), caller, "kms")).toBe(t.principal);

    // A revocation lands while a read of the token is in flight: the read saw the token live and answers this call
    // with it, but must not be cached over the revocation.
    auth.clear();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const check = store.accessTokenCheck.bind(store);
    store.accessTokenCheck = async (id) => {
      const found = await check(id);
      await held;
      return found;
    };
    const inFlight = auth.authenticate(credentials({ token: t.text }), caller, "kms");
    await admin.revokeTokens("app");
    release();
    expect(await inFlight).toBe(t.principal);
    store.accessTokenCheck = check;
    expect((await refusal(() => auth.authenticate(credentials({ token: t.text }), caller, "kms"))).message).toContain("revoked");
  });
});
