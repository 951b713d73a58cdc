import { create } from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { DomainError } from "../../src/errors/domain-error.js";
import type { FieldViolation } from "../../src/errors/domain-error.js";
import { Violations, checkDescription, checkLabels, checkName, maskPathsOf } from "../../src/kms/request-validation.js";

// Per-field limits come before per-element checks: too many labels or mask paths is one violation, whatever
// the elements are.

const ALLOWED = "allowed: name, description, labels, rotationPeriod, nextRotationTime, defaultAlgorithm";

function violationsOf(check: (v: Violations) => void): { message: string; violations: FieldViolation[] } {
  const v = new Violations();
  check(v);
  try {
    v.throwIfAny();
  } catch (error) {
    if (error instanceof DomainError && error.detail.code === "invalid_argument") return error.detail;
    throw error;
  }
  return { message: "", violations: [] };
}

describe("labels", () => {
  it("accepts 64 printable distinct labels", () => {
    expect(violationsOf((v) => checkLabels(v, "labels", Array.from({ length: 64 }, (_, i) => `l${i}`))).violations).toEqual([]);
  });

  it("refuses more than 64 with one violation and no check of any label", () => {
    const labels = Array.from({ length: 1_390_000 }, () => "\u0000");
    const { message, violations } = violationsOf((v) => checkLabels(v, "labels", labels));
    expect(violations).toEqual([{ field: "labels", description: "must hold at most 64 labels, got 1390000" }]);
    expect(message).toBe("labels: must hold at most 64 labels, got 1390000");
  });

  it("lists 20 of 64 bad labels and counts the rest", () => {
    const { message, violations } = violationsOf((v) => checkLabels(v, "labels", Array.from({ length: 64 }, () => "\u0000")));
    expect(violations).toHaveLength(21);
    expect(violations[0]).toEqual({ field: "labels[0]", description: "must contain printable characters only" });
    expect(violations[20]).toEqual({ field: "", description: "and 44 more" });
    expect(message.endsWith("; and 44 more")).toBe(true);
  });

  it("names a duplicate exactly as before, quoted and cut short", () => {
    expect(violationsOf((v) => checkLabels(v, "labels", ["a", "a"])).message).toBe('labels[1]: duplicates label "a"');
    const long = "x".repeat(128);
    expect(violationsOf((v) => checkLabels(v, "labels", [long, long])).violations).toEqual([
      { field: "labels[1]", description: `duplicates label "${"x".repeat(64)}..."` },
    ]);
  });

  it("counts characters, not UTF-16 units, without copying a huge label", () => {
    expect(violationsOf((v) => checkLabels(v, "labels", ["🔑".repeat(128)])).violations).toEqual([]);
    expect(violationsOf((v) => checkLabels(v, "labels", ["🔑".repeat(129)])).message).toBe("labels[0]: must be 1 to 128 characters");
    expect(violationsOf((v) => checkLabels(v, "labels", ["x".repeat(4_000_000), ""])).message).toBe(
      "labels[0]: must be 1 to 128 characters; labels[1]: must be 1 to 128 characters",
    );
  });
});

describe("name and description", () => {
  it("count characters as before", () => {
    expect(violationsOf((v) => checkName(v, "name", "é".repeat(100))).violations).toEqual([]);
    expect(violationsOf((v) => checkName(v, "name", "🔑".repeat(101))).message).toBe("name: must be at most 100 characters");
    expect(violationsOf((v) => checkDescription(v, "description", "d".repeat(4_000_000))).message).toBe(
      "description: must be at most 1024 characters",
    );
  });
});

describe("updateMask", () => {
  const mask = (paths: string[]) => create(FieldMaskSchema, { paths });

  it("names each path it cannot update exactly as before", () => {
    const { message } = violationsOf((v) => maskPathsOf(v, mask(["name", "owner", "bogus"])));
    expect(message).toBe(`updateMask: cannot update "owner"; ${ALLOWED}; updateMask: cannot update "bogus"; ${ALLOWED}`);
  });

  it("names a path in lowerCamel, as a JSON caller wrote it and as the allowed paths are listed", () => {
    // What protobuf-es decodes from the JSON mask "createdAt,fooBar", and what a binary caller sends.
    for (const paths of [["created_at", "foo_bar"], ["createdAt", "fooBar"]]) {
      const { message } = violationsOf((v) => maskPathsOf(v, mask(paths)));
      expect(message).toBe(`updateMask: cannot update "createdAt"; ${ALLOWED}; updateMask: cannot update "fooBar"; ${ALLOWED}`);
    }
  });

  it("quotes a path cut short, with its control characters escaped", () => {
    const { violations } = violationsOf((v) => maskPathsOf(v, mask([`\u0000${"p".repeat(100)}`])));
    expect(violations).toEqual([{ field: "updateMask", description: `cannot update "\\u0000${"p".repeat(63)}..."; ${ALLOWED}` }]);
  });

  it("refuses more than 16 paths with one violation, before looking at any", () => {
    const paths = Array.from({ length: 100_000 }, (_, i) => `p${i}`);
    const { violations } = violationsOf((v) => expect(maskPathsOf(v, mask(paths)).size).toBe(0));
    expect(violations).toEqual([{ field: "updateMask", description: "must hold at most 16 paths, got 100000" }]);
  });

  it("accepts 16 paths, repeated names included", () => {
    const paths = [...Array(8).fill("name"), ...Array(8).fill("labels")] as string[];
    expect([...maskPathsOf(new Violations(), mask(paths))]).toEqual(["name", "labels"]);
  });
});
