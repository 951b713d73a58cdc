import { afterAll, describe, expect, it } from "vitest";
import { AccessPolicy } from "../../src/identity/access-policy.js";
import { IdentityAdmin } from "../../src/identity/identity-admin.js";
import type { GrantRecord } from "../../src/identity/identity-model.js";
import type { Role } from "../../src/identity/roles.js";
import { parseScope } from "../../src/identity/scopes.js";
import type { Scope } from "../../src/identity/scopes.js";
import { systemClock } from "../../src/shared/clock.js";
import { openDatabase } from "../../src/storage/sqlite/database.js";
import { SqliteIdentityStore } from "../../src/storage/sqlite/sqlite-identity-store.js";
import type { IdentityStore } from "../../src/storage/identity-store.js";
import { tempDir } from "../support/temp-dir.js";

// AccessPolicy.decide: "allowed" when a grant covering the scope allows the permission; "denied" when grants cover
// the scope but none allows it (PERMISSION_DENIED); "hidden" when no grant covers the scope at all (a key there is
// answered NOT_FOUND). Grants come from the store and are cached per principal until clear().

// A store that holds only grants, and counts how often they are read.
class GrantStore {
  grants = new Map<string, GrantRecord[]>();
  reads = 0;

  give(principalId: string, role: Role, scope: string): void {
    const list = this.grants.get(principalId) ?? [];
    list.push({ id: `g${list.length}`, principalId, role, scope: parseScope(scope), createdAt: 0 });
    this.grants.set(principalId, list);
  }

  async grantsOf(principalId: string): Promise<GrantRecord[]> {
    this.reads++;
    return [...(this.grants.get(principalId) ?? [])];
  }
}

// The policy's decision on a principal, with its grants as the authorization stage gets them.
async function decideFor(policy: AccessPolicy, principalId: string, permission: string, scope: Scope): Promise<string> {
  return policy.decide(await policy.grantsOf(principalId), permission, scope);
}

async function somewhereFor(policy: AccessPolicy, principalId: string, permission: string): Promise<boolean> {
  return policy.allowedSomewhere(await policy.grantsOf(principalId), permission);
}

function policyOver(store: GrantStore): AccessPolicy {
  // AccessPolicy reads grantsOf only.
  return new AccessPolicy(store as unknown as IdentityStore);
}

const ns = (id: string): Scope => ({ kind: "kms-namespace", id });
const vdc = (id: string): Scope => ({ kind: "service-instance", id });

describe("AccessPolicy.decide", () => {
  const store = new GrantStore();
  store.give("viewer", "viewer", "kms-namespace:a");
  store.give("enc", "encrypter", "kms-namespace:a");
  store.give("enc-viewer", "encrypter", "kms-namespace:a");
  store.give("enc-viewer", "viewer", "kms-namespace:a");
  store.give("all-ns-editor", "editor", "kms-namespace:*");
  store.give("root", "admin", "*");
  store.give("vdc-editor", "editor", "service-instance:vdc-a");
  store.give("b-editor", "editor", "kms-namespace:b");
  const policy = policyOver(store);

  it.each([
    // principal, permission, scope, decision
    ["nobody", "kms.cryptoKeys.get", ns("a"), "hidden"],
    ["viewer", "kms.cryptoKeys.get", ns("a"), "allowed"],
    ["viewer", "kms.cryptoKeys.list", ns("a"), "allowed"],
    ["viewer", "kms.cryptoKeys.destroy", ns("a"), "denied"],
    ["viewer", "kms.cryptoKeys.encrypt", ns("a"), "denied"],
    ["viewer", "kms.cryptoKeys.get", ns("b"), "hidden"],
    ["viewer", "kms.cryptoKeys.get", vdc("a"), "hidden"],
    ["enc", "kms.cryptoKeys.encrypt", ns("a"), "allowed"],
    ["enc", "kms.cryptoKeys.decrypt", ns("a"), "denied"],
    ["enc", "kms.cryptoKeys.destroy", ns("a"), "denied"],
    ["enc", "kms.cryptoKeys.get", ns("a"), "denied"],
    ["enc", "kms.cryptoKeys.encrypt", ns("b"), "hidden"],
    ["enc-viewer", "kms.cryptoKeys.encrypt", ns("a"), "allowed"],
    ["enc-viewer", "kms.cryptoKeys.get", ns("a"), "allowed"],
    ["enc-viewer", "kms.cryptoKeys.destroy", ns("a"), "denied"],
    ["all-ns-editor", "kms.cryptoKeys.destroy", ns("anything"), "allowed"],
    ["all-ns-editor", "iam.grants.create", ns("anything"), "denied"],
    ["all-ns-editor", "compute.nodePools.create", vdc("vdc-a"), "hidden"],
    ["root", "kms.cryptoKeys.destroy", ns("x"), "allowed"],
    ["root", "compute.nodePools.delete", vdc("y"), "allowed"],
    ["root", "iam.grants.create", { kind: "workspace", id: "w" }, "allowed"],
    ["vdc-editor", "compute.nodePools.delete", vdc("vdc-a"), "allowed"],
    ["vdc-editor", "compute.nodePools.delete", vdc("vdc-b"), "hidden"],
    ["b-editor", "kms.cryptoKeys.get", ns("a"), "hidden"],
  ] as const)("%s asking %s on %o: %s", async (principal, permission, scope, decision) => {
    expect(await decideFor(policy, principal, permission, scope)).toBe(decision);
  });

  it("allowedSomewhere: whether any grant allows the permission, on whatever scope", async () => {
    expect(await somewhereFor(policy, "viewer", "kms.cryptoKeys.get")).toBe(true);
    expect(await somewhereFor(policy, "viewer", "kms.cryptoKeys.destroy")).toBe(false);
    expect(await somewhereFor(policy, "enc", "kms.cryptoKeys.encrypt")).toBe(true);
    expect(await somewhereFor(policy, "enc", "kms.cryptoKeys.destroy")).toBe(false);
    expect(await somewhereFor(policy, "b-editor", "kms.cryptoKeys.destroy")).toBe(true);
    expect(await somewhereFor(policy, "nobody", "kms.cryptoKeys.get")).toBe(false);
  });
});

describe("AccessPolicy's cache", () => {
  it("reads a principal's grants once, and again only after clear()", async () => {
    const store = new GrantStore();
    store.give("p", "viewer", "kms-namespace:a");
    const policy = policyOver(store);
    expect(await decideFor(policy, "p", "kms.cryptoKeys.get", ns("a"))).toBe("allowed");
    expect(await decideFor(policy, "p", "kms.cryptoKeys.destroy", ns("a"))).toBe("denied");
    expect(await somewhereFor(policy, "p", "kms.cryptoKeys.get")).toBe(true);
    expect(store.reads).toBe(1);
    store.give("p", "editor", "kms-namespace:a");
    // Until told, the cached grants decide.
    expect(await decideFor(policy, "p", "kms.cryptoKeys.destroy", ns("a"))).toBe("denied");
    policy.clear();
    expect(await decideFor(policy, "p", "kms.cryptoKeys.destroy", ns("a"))).toBe("allowed");
    expect(store.reads).toBe(2);
  });

  it("answers cached grants synchronously, and does not cache a read that a clear() overtook", async () => {
    const store = new GrantStore();
    store.give("p", "viewer", "kms-namespace:a");
    const policy = policyOver(store);
    const inFlight = policy.grantsOf("p");
    expect(inFlight).toBeInstanceOf(Promise);
    policy.clear();
    store.grants.clear();
    expect((await inFlight).length).toBe(1);
    // The read that started before clear() was not cached: the store is read again.
    expect(await decideFor(policy, "p", "kms.cryptoKeys.get", ns("a"))).toBe("hidden");
    expect(store.reads).toBe(2);
    expect(Array.isArray(policy.grantsOf("p"))).toBe(true);
  });

  it("caches a principal without grants too (hidden everywhere), until clear()", async () => {
    const store = new GrantStore();
    const policy = policyOver(store);
    expect(await decideFor(policy, "q", "kms.cryptoKeys.get", ns("a"))).toBe("hidden");
    expect(await decideFor(policy, "q", "kms.cryptoKeys.get", ns("a"))).toBe("hidden");
    expect(store.reads).toBe(1);
  });
});

describe("AccessPolicy over the SQLite store, with grants made as the operator makes them", () => {
  const dir = tempDir();
  const db = openDatabase(dir.path, "upgrade");
  afterAll(() => {
    db.close();
    dir.remove();
  });

  it("decides from the stored grants, and sees a revoked grant after clear()", async () => {
    const store = new SqliteIdentityStore(db);
    const policy = new AccessPolicy(store);
    const admin = new IdentityAdmin(store, systemClock, () => policy.clear());
    const app = await admin.createServiceAccount("orders-app", [["encrypterDecrypter", "kms-namespace:orders"]]);
    const grant = await admin.grant("orders-app", "viewer", "service-instance:*");
    const id = app.account.id;
    expect(await decideFor(policy, id, "kms.cryptoKeys.encrypt", ns("orders"))).toBe("allowed");
    expect(await decideFor(policy, id, "kms.cryptoKeys.decrypt", ns("orders"))).toBe("allowed");
    expect(await decideFor(policy, id, "kms.cryptoKeys.destroy", ns("orders"))).toBe("denied");
    expect(await decideFor(policy, id, "kms.cryptoKeys.encrypt", ns("billing"))).toBe("hidden");
    expect(await decideFor(policy, id, "compute.nodePools.list", vdc("vdc-a"))).toBe("allowed");
    expect(await decideFor(policy, id, "compute.nodePools.create", vdc("vdc-a"))).toBe("denied");
    await admin.revokeGrant(grant.id);
    expect(await decideFor(policy, id, "compute.nodePools.list", vdc("vdc-a"))).toBe("hidden");
  });
});
