import { describe, expect, it } from "vitest";
import { printable, wellFormed } from "../../src/errors/caller-text.js";

// The audit output and error messages escape what a reader could take for markup or a line end (a probe found U+2028
// and U+2029 raw in the audit output, 2026-11-28).
describe("printable", () => {
  it("escapes controls, format characters and the line and paragraph separators, and keeps the rest", () => {
    expect(printable("a\tb\nc\u001bd\u202ee\u2028f\u2029g\u0085h\ufeffi", Infinity)).toBe(
      "a\\u0009b\\u000ac\\u001bd\\u202ee\\u2028f\\u2029g\\u0085h\\ufeffi",
    );
    const text = "ключ 😀 ✓ \u00a0nbsp";
    expect(printable(text, Infinity)).toBe(text);
  });
});

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
