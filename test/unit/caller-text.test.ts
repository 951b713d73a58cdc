import { describe, expect, it } from "vitest";
import { wellFormed } from "../../src/errors/caller-text.js";

describe("wellFormed", () => {
  it("replaces each lone surrogate with U+FFFD and keeps pairs, as String.prototype.toWellFormed does", () => {
    for (const text of ["", "plain", "😀", "\ud83d", "a\ude00b", "\ude00\ud83d", "😀\ud83d😀", "\ud83d".repeat(3)]) {
      const out = wellFormed(text);
      expect(out).toBe((text as string & { toWellFormed(): string }).toWellFormed());
      expect(() => encodeURIComponent(out)).not.toThrow();
    }
  });

  it("returns text without lone surrogates unchanged", () => {
    const text = "ключ 😀 ✓";
    expect(wellFormed(text)).toBe(text);
  });
});
