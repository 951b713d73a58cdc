import { describe, expect, it } from "vitest";
import { formatScope, parseScope, scopeCovers } from "../../src/identity/scopes.js";
import type { GrantScope, Scope } from "../../src/identity/scopes.js";

describe("parseScope", () => {
  it.each([
    ["*", "*"],
    ["kms-namespace:*", { kind: "kms-namespace", id: "*" }],
    ["kms-namespace:payments", { kind: "kms-namespace", id: "payments" }],
    ["service-instance:vdc-a", { kind: "service-instance", id: "vdc-a" }],
    ["workspace:ws.1_A", { kind: "workspace", id: "ws.1_A" }],
  ] as const)("reads %s", (text, scope) => {
    expect(parseScope(text)).toEqual(scope);
    expect(formatScope(parseScope(text))).toBe(text);
  });

  it.each(["", "**", "kms-namespace", "kms-namespace:", ":payments", "namespace:payments", "KMS-NAMESPACE:payments", "vdc:vdc-a", " *"])(
    "refuses %j, saying what is accepted",
    (text) => {
      expect(() => parseScope(text)).toThrow(
        `scope "${text}" is not one of "*", "<kind>:*" or "<kind>:<id>" with kind kms-namespace, service-instance, workspace`,
      );
    },
  );
});

describe("scopeCovers", () => {
  const ns = (id: string): Scope => ({ kind: "kms-namespace", id });
  const vdc = (id: string): Scope => ({ kind: "service-instance", id });
  const cases: [GrantScope, Scope, boolean][] = [
    ["*", ns("a"), true],
    ["*", vdc("x"), true],
    ["*", { kind: "workspace", id: "w" }, true],
    [{ kind: "kms-namespace", id: "*" }, ns("a"), true],
    [{ kind: "kms-namespace", id: "*" }, ns("*"), true],
    [{ kind: "kms-namespace", id: "*" }, vdc("a"), false],
    [{ kind: "kms-namespace", id: "a" }, ns("a"), true],
    [{ kind: "kms-namespace", id: "a" }, ns("b"), false],
    [{ kind: "kms-namespace", id: "a" }, ns("A"), false],
    [{ kind: "kms-namespace", id: "a" }, ns("ab"), false],
    [{ kind: "kms-namespace", id: "a" }, vdc("a"), false],
    [{ kind: "service-instance", id: "a" }, ns("a"), false],
    [{ kind: "workspace", id: "w" }, { kind: "workspace", id: "w" }, true],
  ];
  it.each(cases.map(([grant, scope, covers]) => [formatScope(grant), formatScope(scope), covers] as const))("%s covers %s: %s", (grant, scope, covers) => {
    const parsed = parseScope(scope);
    if (parsed === "*") throw new Error("a call's scope is never global");
    expect(scopeCovers(parseScope(grant), parsed)).toBe(covers);
  });
});
