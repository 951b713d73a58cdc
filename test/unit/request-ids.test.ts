import { describe, expect, it } from "vitest";
import { newRequestId } from "../../src/shared/request-ids.js";

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("newRequestId", () => {
  it("makes version 4 UUIDs, all different, across several refills of its pool", () => {
    const ids = Array.from({ length: 2000 }, () => newRequestId());
    for (const id of ids) expect(id).toMatch(UUID_V4);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("returns strings that later ids do not change (the scratch buffer is reused)", () => {
    const first = newRequestId();
    const copy = `${first}`;
    newRequestId();
    expect(first).toBe(copy);
  });

  it("spreads its random bits over every hex digit but the version's", () => {
    // 122 random bits: over 2000 ids, every random position takes all 16 digits (the variant's, 4 of them).
    const seen = Array.from({ length: 36 }, () => new Set<string>());
    for (let n = 0; n < 2000; n++) [...newRequestId()].forEach((c, i) => seen[i]!.add(c));
    seen.forEach((digits, i) => {
      if ([8, 13, 18, 23].includes(i)) expect([...digits]).toEqual(["-"]);
      else if (i === 14) expect([...digits]).toEqual(["4"]);
      else if (i === 19) expect([...digits].sort()).toEqual(["8", "9", "a", "b"]);
      else expect(digits.size).toBe(16);
    });
  });
});
