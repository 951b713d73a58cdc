import { describe, expect, test } from "vitest";
import { compareSpecificity, matchTemplate, parsePathTemplate, splitPath } from "../../src/transport/rest/path-template.js";
import { RouteTable } from "../../src/transport/rest/route-table.js";
import { methodTableOf } from "../support/method-table.js";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { ItemService } from "./rest-fixture.js";

const match = (template: string, path: string) => matchTemplate(parsePathTemplate(template), splitPath(path));

describe("parsePathTemplate", () => {
  test("literals, variables, nested field paths and verbs", () => {
    const t = parsePathTemplate("/cluster/v1/{service_instance_id}/tasks/{task_id}:wait");
    expect(t.segments).toEqual([
      { kind: "literal", value: "cluster" },
      { kind: "literal", value: "v1" },
      { kind: "one" },
      { kind: "literal", value: "tasks" },
      { kind: "one" },
    ]);
    expect(t.variables).toEqual([
      { fieldPath: "service_instance_id", start: 2, end: 3 },
      { fieldPath: "task_id", start: 4, end: 5 },
    ]);
    expect(t.verb).toBe("wait");
    expect(parsePathTemplate("/v1/keys/{key.id}").variables).toEqual([{ fieldPath: "key.id", start: 2, end: 3 }]);
  });

  test("variables with sub-templates and wildcards", () => {
    const t = parsePathTemplate("/v1/{name=projects/*/keys/*}/x/*");
    expect(t.variables).toEqual([{ fieldPath: "name", start: 1, end: 5 }]);
    expect(t.segments.map((s) => s.kind)).toEqual(["literal", "literal", "one", "literal", "one", "literal", "one"]);
    const rest = parsePathTemplate("/files/{path=**}");
    expect(rest.variables).toEqual([{ fieldPath: "path", start: 1, end: undefined }]);
    expect(parsePathTemplate("/").segments).toEqual([]);
  });

  test("rejects malformed templates", () => {
    for (const bad of ["v1/keys", "/v1/{key", "/v1/{a}}", "/v1/**/x", "/v1//x", "/v1/{9x}", "/v1/{a{b}}"]) {
      expect(() => parsePathTemplate(bad), bad).toThrow();
    }
  });
});

describe("matchTemplate", () => {
  test("binds percent-decoded variables", () => {
    expect(match("/v1/keys/{key_id}", "/v1/keys/a%20b%2Fc")).toEqual(["a b/c"]);
    expect(match("/v1/keys/{key_id}/versions/{v}", "/v1/keys/k1/versions/3")).toEqual(["k1", "3"]);
    expect(match("/v1/keys/{key_id}", "/v1/keys")).toBeUndefined();
    expect(match("/v1/keys/{key_id}", "/v1/keys/a/b")).toBeUndefined();
    expect(match("/v1/keys/{key_id}", "/v2/keys/a")).toBeUndefined();
  });

  test("an empty segment fills no variable", () => {
    expect(match("/v1/keys/{key_id}", "/v1/keys/")).toBeUndefined();
    expect(match("/v1/keys/{key_id}/versions", "/v1/keys//versions")).toBeUndefined();
  });

  test("multi-segment variables keep separators and escaped slashes", () => {
    expect(match("/v2/{name=shelves/*/items/*}", "/v2/shelves/s1/items/i%201")).toEqual(["shelves/s1/items/i 1"]);
    expect(match("/v2/{name=shelves/*/items/*}", "/v2/books/s1/items/i1")).toBeUndefined();
    expect(match("/files/{path=**}", "/files/a/b%2Fc/d")).toEqual(["a/b%2Fc/d"]);
    expect(match("/files/{path=**}", "/files")).toEqual([""]);
  });

  test("splitPath marks a segment with a malformed escape, which matches no literal and fills a variable as null", () => {
    expect(splitPath("/v1/%E0%A4%A/ok").decoded).toEqual(["v1", null, "ok"]);
    expect(match("/v1/{id}", "/v1/%FF")).toEqual([null]);
    expect(match("/v1/keys", "/v1/ke%ZZys")).toBeUndefined();
    expect(match("/files/{path=**}", "/files/a/%E0%A4/b")).toEqual([null]);
  });
});

test("compareSpecificity puts literals before variables and verbs before none", () => {
  const sorted = ["/v1/{a}/items", "/files/**", "/v1/special/items", "/v1/{a}/items:wait", "/files"]
    .map(parsePathTemplate)
    .sort(compareSpecificity)
    .map((t) => t.source);
  expect(sorted.indexOf("/v1/special/items")).toBeLessThan(sorted.indexOf("/v1/{a}/items"));
  expect(sorted.indexOf("/v1/{a}/items:wait")).toBeLessThan(sorted.indexOf("/v1/{a}/items"));
  expect(sorted.indexOf("/files")).toBeLessThan(sorted.indexOf("/files/**"));
});

describe("RouteTable", () => {
  const table = new RouteTable(methodTableOf([KeyManagerService, ItemService]));

  const found = (method: string, path: string) => {
    const r = table.lookup(method, path);
    if (r.kind !== "found") throw new Error(`${method} ${path}: ${r.kind}`);
    return { name: r.route.method.name, values: r.pathValues };
  };

  test("routes every annotated KMS method", () => {
    const kms = table.routes.filter((r) => r.method.parent === KeyManagerService);
    expect(kms).toHaveLength(KeyManagerService.methods.length);
    expect(found("PATCH", "/v1/keys/k1")).toEqual({ name: "UpdateCryptoKey", values: ["k1"] });
    expect(found("GET", "/v1/keys/k1/versions/2")).toEqual({ name: "GetCryptoKeyVersion", values: ["k1", "2"] });
    expect(found("POST", "/v1/keys/k1/versions/2/disable")).toEqual({ name: "DisableCryptoKeyVersion", values: ["k1", "2"] });
    expect(found("GET", "/v1/keys")).toEqual({ name: "ListCryptoKeys", values: [] });
    expect(found("POST", "/v1/keys")).toEqual({ name: "CreateCryptoKey", values: [] });
  });

  test("prefers a literal segment over a variable", () => {
    expect(found("GET", "/v1/shelves/special/items").name).toBe("ListSpecialItems");
    expect(found("GET", "/v1/shelves/other/items")).toEqual({ name: "ListItems", values: ["other"] });
  });

  test("verbs, additional bindings, custom methods and ** templates", () => {
    expect(found("POST", "/v1/shelves/s/items/7:wait")).toEqual({ name: "WaitItem", values: ["s", "7"] });
    expect(found("GET", "/v1/shelves/s/items/7:wait")).toEqual({ name: "GetItem", values: ["s", "7:wait"] });
    expect(found("GET", "/v1/items/9")).toEqual({ name: "GetItem", values: ["9"] });
    expect(found("PURGE", "/v1/shelves/s:purge")).toEqual({ name: "PurgeShelf", values: ["s"] });
    expect(found("GET", "/v2/files/a/b/c.txt")).toEqual({ name: "GetFile", values: ["a/b/c.txt"] });
  });

  test("a known path with another method lists the allowed ones", () => {
    expect(table.lookup("PUT", "/v1/keys/k1")).toMatchObject({ kind: "method_not_allowed", allow: ["DELETE", "GET", "HEAD", "PATCH"] });
    expect(table.lookup("GET", "/v1/encrypt")).toMatchObject({ kind: "method_not_allowed", allow: ["POST"], entry: { policy: { domain: "kms" } } });
    expect(table.lookup("GET", "/v1/nothing")).toEqual({ kind: "not_found" });
    expect(table.lookup("GET", "/")).toEqual({ kind: "not_found" });
  });

  test("a malformed escape in a variable finds the route, with the value null; in a literal, no route", () => {
    expect(table.lookup("GET", "/v1/keys/%ZZ")).toMatchObject({ kind: "found", pathValues: [null] });
    expect(table.lookup("GET", "/v1/ke%ZZys/k1")).toEqual({ kind: "not_found" });
  });

  test("start-up fails on bad annotations", () => {
    expect(() => new RouteTable(methodTableOf([KeyManagerService, KeyManagerService]))).toThrow(/is served twice/);
  });
});
