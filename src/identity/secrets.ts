import { hash, randomBytes, timingSafeEqual } from "node:crypto";

// Every secret the server issues is 256 random bits, shown to its owner once and stored only as its SHA-256.
// A slow password hash buys nothing for secrets of that entropy, and SHA-256 keeps a token check to about a
// microsecond on every call.
//
// Tokens and API keys read `<prefix>.<id>.<secret>`: the id finds the stored hash without searching by the
// secret, and the prefix tells a secret scanner (and a person) what leaked. base64url never contains ".".
export type SecretKind = "access-token" | "api-key" | "client-secret";

const prefixes: Record<SecretKind, string> = {
  "access-token": "cpat",
  "api-key": "cpak",
  "client-secret": "cpcs",
};

export interface IssuedSecret {
  // Stored in the clear: names the secret, proves nothing.
  id: string;
  // What the owner is given, once.
  text: string;
  hash: Uint8Array;
}

// Random ids, in base64url without a leading "-": the operator command takes ids as arguments, and an id starting
// with "-" was read as an option (a revocation by id failed about one time in 32).
export function newId(bytes = 12): string {
  for (;;) {
    const id = randomBytes(bytes).toString("base64url");
    if (!id.startsWith("-")) return id;
  }
}

export function issueSecret(kind: SecretKind, id: string = newId()): IssuedSecret {
  const secret = randomBytes(32).toString("base64url");
  const text = `${prefixes[kind]}.${id}.${secret}`;
  return { id, text, hash: hashSecret(text) };
}

// crypto.hash, the one-shot form: a third cheaper than createHash per call, which every authenticated call pays.
export function hashSecret(text: string): Uint8Array {
  return hash("sha256", text, "buffer");
}

// Compares in constant time: digests of equal length, whatever was presented.
export function secretMatches(presented: string, storedHash: Uint8Array): boolean {
  const hash = hashSecret(presented);
  return storedHash.length === hash.length && timingSafeEqual(hash, storedHash);
}

// The id of a presented token or API key of the given kind, or null when it does not have the form the server
// issues (then it cannot be valid, and nothing is looked up).
export function idOf(kind: SecretKind, presented: string): string | null {
  const prefix = prefixes[kind];
  if (presented.length > 200 || !presented.startsWith(`${prefix}.`)) return null;
  const dot = presented.indexOf(".", prefix.length + 1);
  if (dot < 0) return null;
  const id = presented.slice(prefix.length + 1, dot);
  return /^[A-Za-z0-9_-]{1,32}$/.test(id) ? id : null;
}
