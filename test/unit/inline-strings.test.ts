import { describe, expect, it } from "vitest";
import { InlineStrings } from "../../src/kms/inline-strings.js";

// The key cache keeps ids and names as bytes (src/kms/inline-strings.ts) and finds keys by comparing ids with them.
describe("InlineStrings", () => {
  const samples = ["", "a", "abc", "abd", "ab", "é", "ée", "eé", "ключ", "🔑", "鍵鍵", "x".repeat(8), "é".repeat(4), "🔑🔑"];

  it("gives back what fits, in any script, and refuses what does not", () => {
    const strings = new InlineStrings(8);
    strings.grow(samples.length + 2);
    samples.forEach((s, i) => expect(strings.set(i, s), s).toBe(true));
    samples.forEach((s, i) => expect(strings.get(i)).toBe(s));
    // Nine bytes: nine ASCII characters, or five characters of which four take two bytes.
    expect(strings.set(samples.length, "x".repeat(9))).toBe(false);
    expect(strings.set(samples.length + 1, "é".repeat(4) + "x")).toBe(false);
    expect(strings.get(samples.length)).toBeUndefined();
    expect(strings.get(samples.length + 1)).toBeUndefined();
  });

  it("compares a string with a slot's bytes exactly: no prefix, extension or other encoding matches", () => {
    const strings = new InlineStrings(8);
    strings.grow(samples.length);
    samples.forEach((s, i) => strings.set(i, s));
    for (const [i, stored] of samples.entries()) {
      for (const probe of [...samples, "abcé", "é\u0000", "\u00e9".normalize("NFD")]) {
        expect(strings.equals(i, probe), `${JSON.stringify(stored)} against ${JSON.stringify(probe)}`).toBe(probe === stored);
      }
    }
  });

  it("keeps slots across growth and forgets cleared ones", () => {
    const strings = new InlineStrings(4);
    strings.grow(2);
    strings.set(0, "keep");
    strings.set(1, "gone");
    strings.clear(1);
    strings.grow(1000);
    expect([strings.get(0), strings.get(1), strings.get(999)]).toEqual(["keep", undefined, undefined]);
    expect(strings.equals(1, "gone")).toBe(false);
  });
});
