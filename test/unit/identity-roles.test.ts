import { getOption, hasOption } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { method_policy } from "../../gen/cloudplane/api/v1/policy_pb.js";
import { isRole, roleAllows, roleNames } from "../../src/identity/roles.js";
import type { Role } from "../../src/identity/roles.js";
import { apiServices } from "../../src/routes.js";

// What each role may do, written out permission by permission for every permission a served method declares
// (read from the descriptors, so a new method is checked at once), and for the access-management permissions
// ("iam.*") that only admin holds.

const declared = [...new Set(apiServices.flatMap((s) => s.methods).filter((m) => hasOption(m, method_policy)).map((m) => getOption(m, method_policy).permission))].sort();

const reads = new Set([
  "compute.configs.list",
  "kms.cryptoKeys.get",
  "kms.cryptoKeys.list",
  "kms.cryptoKeyVersions.get",
  "kms.cryptoKeyVersions.list",
  "compute.nodePools.get",
  "compute.nodePools.list",
  "compute.tasks.get",
  "compute.tasks.list",
  "compute.vappTemplates.list",
  "compute.vapps.get",
]);
const iam = ["iam.grants.create", "iam.grants.list", "iam.serviceAccounts.get"];

// The expected answer, from the role descriptions (src/identity/roles.ts), not from its code.
function expected(role: Role, permission: string): boolean {
  const isIam = permission.startsWith("iam.");
  switch (role) {
    case "admin":
      return true;
    case "editor":
      return !isIam;
    case "viewer":
      return reads.has(permission);
    case "encrypter":
      return permission === "kms.cryptoKeys.encrypt";
    case "decrypter":
      return permission === "kms.cryptoKeys.decrypt";
    case "encrypterDecrypter":
      return permission === "kms.cryptoKeys.encrypt" || permission === "kms.cryptoKeys.decrypt";
  }
}

describe("roleAllows", () => {
  it("knows the permissions the methods declare", () => {
    expect(declared).toEqual([
      "auth.tokens.create",
      "compute.configs.list",
      "compute.nodePools.create",
      "compute.nodePools.delete",
      "compute.nodePools.get",
      "compute.nodePools.list",
      "compute.nodePools.update",
      "compute.tasks.get",
      "compute.tasks.list",
      "compute.vappTemplates.list",
      "compute.vapps.create",
      "compute.vapps.get",
      "kms.cryptoKeyVersions.create",
      "kms.cryptoKeyVersions.destroy",
      "kms.cryptoKeyVersions.get",
      "kms.cryptoKeyVersions.list",
      "kms.cryptoKeyVersions.restore",
      "kms.cryptoKeyVersions.update",
      "kms.cryptoKeys.create",
      "kms.cryptoKeys.decrypt",
      "kms.cryptoKeys.destroy",
      "kms.cryptoKeys.encrypt",
      "kms.cryptoKeys.get",
      "kms.cryptoKeys.list",
      "kms.cryptoKeys.update",
    ]);
  });

  it.each(roleNames.flatMap((role) => [...declared, ...iam].map((permission) => [role, permission, expected(role, permission)] as const)))(
    "%s on %s: %s",
    (role, permission, allowed) => {
      expect(roleAllows(role, permission)).toBe(allowed);
    },
  );

  it("an encrypter can neither read, change, destroy nor decrypt; a viewer can neither encrypt nor decrypt", () => {
    for (const permission of ["kms.cryptoKeys.get", "kms.cryptoKeys.destroy", "kms.cryptoKeyVersions.destroy", "kms.cryptoKeys.decrypt"]) {
      expect(roleAllows("encrypter", permission)).toBe(false);
    }
    expect(roleAllows("viewer", "kms.cryptoKeys.encrypt")).toBe(false);
    expect(roleAllows("viewer", "kms.cryptoKeys.decrypt")).toBe(false);
  });

  it("reads the verb as the whole last part: no prefix of get or list counts as a read", () => {
    expect(roleAllows("viewer", "kms.cryptoKeys.getIamPolicy")).toBe(false);
    expect(roleAllows("viewer", "kms.cryptoKeys.lister")).toBe(false);
    expect(roleAllows("viewer", "kms.cryptoKeys.forget")).toBe(false);
    expect(roleAllows("viewer", "iam.grants.list")).toBe(false);
  });
});

describe("isRole", () => {
  it("accepts exactly the role names", () => {
    for (const role of roleNames) expect(isRole(role)).toBe(true);
    for (const other of ["", "Admin", "owner", "encrypter-decrypter", "viewer "]) expect(isRole(other)).toBe(false);
  });
});
