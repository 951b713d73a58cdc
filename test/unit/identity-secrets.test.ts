import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { hashSecret, idOf, issueSecret, newId, secretMatches } from "../../src/identity/secrets.js";
import type { SecretKind } from "../../src/identity/secrets.js";

const kinds: [SecretKind, string][] = [
  ["access-token", "cpat"],
  ["api-key", "cpak"],
  ["client-secret", "cpcs"],
];

describe("issueSecret", () => {
  it.each(kinds)("issues a %s as <%s>.<id>.<256 random bits in base64url>, kept only as its SHA-256", (kind, prefix) => {
    const issued = issueSecret(kind);
    expect(issued.text).toMatch(new RegExp(`^${prefix}\\.${issued.id}\\.[A-Za-z0-9_-]{43}$`));
    expect(issued.id).toMatch(/^[A-Za-z0-9_-]{16}$/);
    expect(Buffer.from(issued.hash)).toEqual(createHash("sha256").update(issued.text).digest());
    expect(issueSecret(kind).text).not.toBe(issued.text);
  });

  it("takes the id it is given (a client secret carries its client id)", () => {
    expect(issueSecret("client-secret", "sa-abc").text).toMatch(/^cpcs\.sa-abc\./);
  });

  it("makes ids of the given number of random bytes", () => {
    expect(newId(9)).toMatch(/^[A-Za-z0-9_-]{12}$/);
    expect(newId()).not.toBe(newId());
  });
});

describe("idOf", () => {
  it.each(kinds)("reads the id of a %s it issued", (kind) => {
    const issued = issueSecret(kind);
    expect(idOf(kind, issued.text)).toBe(issued.id);
  });

  it("does not read a secret of another kind", () => {
    expect(idOf("access-token", issueSecret("api-key").text)).toBeNull();
    expect(idOf("api-key", issueSecret("access-token").text)).toBeNull();
  });

  it.each([
    ["", "empty"],
    ["cpat", "the prefix alone"],
    ["cpat.", "no id"],
    ["cpat.abc", "no second dot"],
    ["cpat..secret", "an empty id"],
    ["cpat.a b.secret", "a space in the id"],
    ["cpat.a/b.secret", "a character outside base64url"],
    [`cpat.${"a".repeat(33)}.secret`, "an id over 32 characters"],
    [`cpat.abc.${"s".repeat(200)}`, "over 200 characters in all"],
    ["Bearer cpat.abc.secret", "the Bearer prefix left in"],
    ["CPAT.abc.secret", "the prefix in capitals"],
  ])("finds no id in %j (%s)", (presented) => {
    expect(idOf("access-token", presented)).toBeNull();
  });

  it("takes the id up to the second dot", () => {
    expect(idOf("access-token", "cpat.abc.def.ghi")).toBe("abc");
    expect(idOf("access-token", `cpat.${"a".repeat(32)}.x`)).toBe("a".repeat(32));
  });
});

describe("secretMatches", () => {
  const issued = issueSecret("access-token");

  it("matches the text that was issued, and nothing else", () => {
    expect(secretMatches(issued.text, issued.hash)).toBe(true);
    expect(secretMatches(`${issued.text}x`, issued.hash)).toBe(false);
    expect(secretMatches(issued.text.slice(0, -1), issued.hash)).toBe(false);
    expect(secretMatches(issued.text.toUpperCase(), issued.hash)).toBe(false);
    expect(secretMatches(issueSecret("access-token", issued.id).text, issued.hash)).toBe(false);
    expect(secretMatches("", issued.hash)).toBe(false);
  });

  it("answers false, not a throw, for a stored hash of another length", () => {
    expect(secretMatches(issued.text, issued.hash.subarray(0, 16))).toBe(false);
    expect(secretMatches(issued.text, new Uint8Array(0))).toBe(false);
  });

  it("compares hashes, never the secret itself: the hash is SHA-256 of the whole text", () => {
    expect(Buffer.from(hashSecret("abc")).toString("hex")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });
});

describe("newId", () => {
  it("never starts with '-', which the operator command would read as an option", () => {
    // 1 id in 64 starts with "-" in base64url: 5,000 would all but surely show one.
    const ids = Array.from({ length: 5_000 }, () => newId());
    expect(ids.filter((id) => id.startsWith("-"))).toEqual([]);
    expect(new Set(ids.map((id) => id[0])).size).toBeGreaterThan(50);
    expect(ids.every((id) => /^[A-Za-z0-9_-]{16}$/.test(id))).toBe(true);
  });
});
