// What each role allows. Permissions are "<area>.<resource>.<verb>", as each method's policy declares them in
// proto/ (kms.cryptoKeys.encrypt, compute.nodePools.delete ...). Roles are fixed by the product; grants give
// them to principals on scopes (scopes.ts).
export const roleNames = ["viewer", "editor", "admin", "encrypter", "decrypter", "encrypterDecrypter"] as const;

export type Role = (typeof roleNames)[number];

export const roleDescriptions: Record<Role, string> = {
  viewer: "reads resources (get, list); no encryption, no changes",
  editor: "reads, creates, changes and deletes resources, and encrypts and decrypts with keys",
  admin: "everything an editor may do, and manages access (grants) on the scope",
  encrypter: "encrypts with the keys of the scope; cannot read, change or destroy them",
  decrypter: "decrypts with the keys of the scope; cannot read, change or destroy them",
  encrypterDecrypter: "encrypts and decrypts with the keys of the scope; cannot read, change or destroy them",
};

const readVerbs = new Set(["get", "list"]);

export function isRole(value: string): value is Role {
  return (roleNames as readonly string[]).includes(value);
}

export function roleAllows(role: Role, permission: string): boolean {
  switch (role) {
    case "admin":
      return true;
    case "editor":
      return !permission.startsWith("iam.");
    case "viewer":
      return readVerbs.has(permission.slice(permission.lastIndexOf(".") + 1)) && !permission.startsWith("iam.");
    case "encrypter":
      return permission === "kms.cryptoKeys.encrypt";
    case "decrypter":
      return permission === "kms.cryptoKeys.decrypt";
    case "encrypterDecrypter":
      return permission === "kms.cryptoKeys.encrypt" || permission === "kms.cryptoKeys.decrypt";
  }
}
