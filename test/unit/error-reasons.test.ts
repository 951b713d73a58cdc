import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { reasons } from "../../src/errors/reasons.js";

// As fastify checks its error codes: every reason a caller can receive is documented for them.
describe("ErrorInfo reasons", () => {
  const doc = readFileSync(new URL("../../docs/errors.md", import.meta.url), "utf8");

  it.each(Object.keys(reasons))("%s is described in docs/errors.md", (reason) => {
    expect(doc).toContain(`\`${reason}\``);
  });

  it("are UPPER_SNAKE", () => {
    for (const reason of Object.keys(reasons)) expect(reason).toMatch(/^[A-Z][A-Z0-9_]*$/);
  });
});
