import { describe, expect, it } from "vitest";
import { printable, quoted } from "../../src/errors/caller-text.js";
import { invalidArgument } from "../../src/errors/domain-error.js";
import type { DomainErrorKind } from "../../src/errors/domain-error.js";
import { MAX_LISTED_VIOLATIONS, ViolationList } from "../../src/errors/violation-list.js";

// What one INVALID_ARGUMENT may say: the first 20 violations and a count of the rest, caller text cut short and
// escaped, and exactly today's text when there are only a few.

function invalid(detail: DomainErrorKind): Extract<DomainErrorKind, { code: "invalid_argument" }> {
  if (detail.code !== "invalid_argument") throw new Error(`expected invalid_argument, got ${detail.code}`);
  return detail;
}

function listOf(n: number, description = "must contain printable characters only"): ViolationList {
  const list = new ViolationList();
  for (let i = 0; i < n; i++) list.add(`labels[${i}]`, description);
  return list;
}

describe("ViolationList", () => {
  it("reads one violation exactly as before", () => {
    const error = invalid(invalidArgument("kms", [{ field: "parentId", description: "is required" }]).detail);
    expect(error.message).toBe("parentId: is required");
    expect(error.violations).toEqual([{ field: "parentId", description: "is required" }]);
  });

  it("reads a few violations exactly as before, in order", () => {
    const list = new ViolationList();
    list.add("parentId", "is required");
    list.add("page.limit", "must be between 0 and 1000 (0 means 100), got 1001");
    list.add("labels[1]", 'duplicates label "a"');
    const error = invalid(invalidArgument("kms", list).detail);
    expect(error.message).toBe('parentId: is required; page.limit: must be between 0 and 1000 (0 means 100), got 1001; labels[1]: duplicates label "a"');
    expect(error.violations.map((v) => v.field)).toEqual(["parentId", "page.limit", "labels[1]"]);
  });

  it("writes a violation of the request as a whole (empty field) as its description alone", () => {
    expect(invalid(invalidArgument("cloudplane", [{ field: "", description: "the request body is not valid JSON" }]).detail).message).toBe(
      "the request body is not valid JSON",
    );
  });

  it("lists exactly 20 without a marker", () => {
    const error = invalid(invalidArgument("kms", listOf(MAX_LISTED_VIOLATIONS)).detail);
    expect(error.violations).toHaveLength(20);
    expect(error.message).not.toContain("more");
  });

  it("lists the first 20 of 21 and says how many more, in the details and in the message", () => {
    const error = invalid(invalidArgument("kms", listOf(21)).detail);
    expect(error.violations).toHaveLength(21);
    expect(error.violations.slice(0, 20).map((v) => v.field)).toEqual(Array.from({ length: 20 }, (_, i) => `labels[${i}]`));
    expect(error.violations[20]).toEqual({ field: "", description: "and 1 more" });
    expect(error.message.split("; ")).toHaveLength(21);
    expect(error.message.endsWith("labels[19]: must contain printable characters only; and 1 more")).toBe(true);
  });

  it("counts a million violations without keeping them", () => {
    const list = listOf(1_000_000);
    expect(list.count).toBe(1_000_000);
    const error = invalid(invalidArgument("kms", list).detail);
    expect(error.violations).toHaveLength(21);
    expect(error.violations[20]?.description).toBe("and 999980 more");
    expect(error.message.length).toBeLessThan(2100);
  });

  it("stops listing when the listed text would pass 2 KiB, and counts the rest", () => {
    const list = listOf(20, "d".repeat(400));
    const error = invalid(invalidArgument("kms", list).detail);
    const listed = error.violations.filter((v) => v.field !== "");
    expect(listed.length).toBeLessThan(20);
    expect(listed.map((v) => v.field)).toEqual(Array.from({ length: listed.length }, (_, i) => `labels[${i}]`));
    expect(error.violations.at(-1)).toEqual({ field: "", description: `and ${20 - listed.length} more` });
    expect(error.message.length).toBeLessThan(2100);
  });

  it("once one is left out, lists no later one, however short", () => {
    const list = listOf(5, "d".repeat(500));
    list.add("short", "x");
    const error = invalid(invalidArgument("kms", list).detail);
    expect(error.violations.map((v) => v.field)).not.toContain("short");
    expect(error.violations.at(-1)?.description).toMatch(/^and \d+ more$/);
  });

  it("always lists the first violation, cut to its bounds", () => {
    const error = invalid(invalidArgument("cloudplane", [{ field: `key.${"f".repeat(3_000_000)}`, description: "e".repeat(100_000) }]).detail);
    expect(error.violations).toHaveLength(1);
    expect(error.violations[0]?.field).toBe(`key.${"f".repeat(124)}...`);
    expect(error.violations[0]?.description).toBe(`${"e".repeat(512)}...`);
    expect(error.message.length).toBeLessThan(700);
  });

  it("escapes unprintable characters of a field named by the caller", () => {
    const error = invalid(invalidArgument("cloudplane", [{ field: "key.a\u0000b\u202e", description: "unknown field" }]).detail);
    expect(error.violations[0]?.field).toBe("key.a\\u0000b\\u202e");
    expect(error.message).toBe("key.a\\u0000b\\u202e: unknown field");
  });
});

describe("caller text", () => {
  it("quotes a short printable value as JSON does", () => {
    expect(quoted("owner")).toBe('"owner"');
    expect(quoted('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(quoted("team=payments ✓ 🔑")).toBe('"team=payments ✓ 🔑"');
  });

  it("cuts a long value to 64 characters and marks the cut", () => {
    expect(quoted("x".repeat(4_000_000))).toBe(`"${"x".repeat(64)}..."`);
    expect(quoted("x".repeat(64))).toBe(`"${"x".repeat(64)}"`);
  });

  it("never carries a control, format or lone surrogate character raw", () => {
    expect(quoted("\u0000")).toBe('"\\u0000"');
    expect(quoted("a\u001b[31mb\u007f\u0085")).toBe('"a\\u001b[31mb\\u007f\\u0085"');
    expect(quoted("\u202eevil\u200b")).toBe('"\\u202eevil\\u200b"');
    // A surrogate pair cut in two by the 64-character limit.
    const cut = quoted(`${"x".repeat(63)}🔑`);
    expect(cut).toBe(`"${"x".repeat(63)}\\ud83d..."`);
    expect(cut).not.toMatch(/\p{C}/u);
  });

  it("leaves printable text alone and cuts text of any length", () => {
    expect(printable("labels[3]", 128)).toBe("labels[3]");
    expect(printable("\u0000".repeat(1_000_000), 4)).toBe("\\u0000\\u0000\\u0000\\u0000...");
  });
});
