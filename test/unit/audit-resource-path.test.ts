import { randomUUID } from "node:crypto";
import { fromJson, ScalarType } from "@bufbuild/protobuf";
import type { DescMessage, DescMethod, JsonObject, Message } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { newKeyId } from "../../src/kms/key-manager.js";
import { policyOf, resourceTemplateOf } from "../../src/pipeline/method-policy.js";
import { encodePathSegment, resourcePathOf } from "../../src/pipeline/request-fields.js";
import { apiServices } from "../../src/routes.js";
import { recordMatches } from "../../src/storage/audit-batch.js";
import type { AuditRecord } from "../../src/identity/identity-model.js";
import { RouteTable } from "../../src/transport/rest/route-table.js";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { methodTableOf } from "../support/method-table.js";

// The audit trail names the resource of a call by its REST path with the request's ids in it (docs/access.md, "Audit
// trail"). The ids are the caller's, not yet validated: each is percent-encoded as a REST URL carries it, so that a
// key id "<another key>/versions/1" is not the path of a call on that other key.

const VICTIM = "k0a1b2c3d4e5f6g7h8i9";

// Values a hostile caller may give as an id, with what each must not be read as.
const HOSTILE = [
  `${VICTIM}/versions/1`, // a sub-resource of the victim
  `${VICTIM}/versions/1/disable`,
  `${VICTIM}:wait`, // a custom method on it
  `${VICTIM}?x=1`, // a query
  `${VICTIM}#f`, // a fragment
  `${VICTIM}%2Fversions%2F1`, // already encoded: its "%" must be encoded again
  "..",
  ".",
  `x/../${VICTIM}`,
  "\u00e9\u65e5\ud83d\ude00", // non-ASCII: é, 日, and an emoji (a surrogate pair)
  "\ud800", // a lone surrogate, which UTF-8 cannot encode
  "a b\n\u001b[2J\t",
];

// Without a lone surrogate (String.prototype.isWellFormed, which this project's ES2022 types do not declare).
const wellFormed = (text: string): boolean => !/\p{Cs}/u.test(text);

describe("encodePathSegment", () => {
  it("writes every character but [A-Za-z0-9._~-] as the %XX of its UTF-8, as google.api.http writes a one-segment variable", () => {
    expect(encodePathSegment(`${VICTIM}/versions/1`)).toBe(`${VICTIM}%2Fversions%2F1`);
    expect(encodePathSegment("%2F")).toBe("%252F");
    expect(encodePathSegment("a?b#c")).toBe("a%3Fb%23c");
    expect(encodePathSegment(":@&=+$,;!'()*")).toBe("%3A%40%26%3D%2B%24%2C%3B%21%27%28%29%2A");
    expect(encodePathSegment("\u00e9\u65e5\ud83d\ude00")).toBe("%C3%A9%E6%97%A5%F0%9F%98%80");
    expect(encodePathSegment("a b\n\u0000")).toBe("a%20b%0A%00");
  });

  it("writes a value that is a dot segment as %2E, and a lone surrogate as its WTF-8 bytes instead of throwing", () => {
    expect(encodePathSegment(".")).toBe("%2E");
    expect(encodePathSegment("..")).toBe("%2E%2E");
    expect(encodePathSegment("...")).toBe("...");
    expect(encodePathSegment("x\ud800")).toBe("x%ED%A0%80");
    expect(encodePathSegment("\udfff")).toBe("%ED%BF%BF");
  });

  it("leaves every id the server makes or accepts as it is, so a real resource's path is what older records hold", () => {
    for (const id of [newKeyId(Date.now()), randomUUID(), "vdc-a", "DGX2-MT", "team.a_b-c", "v100.1gpu", "~x"]) {
      expect(encodePathSegment(id)).toBe(id);
    }
  });

  it("gives each value its own segment: nothing but unreserved characters and escapes, and decoded back to the value", () => {
    const encodings = new Map<string, string>();
    for (const value of [...HOSTILE, VICTIM, "", "%", "%25", "%2E", "%ED%A0%80"]) {
      const encoded = encodePathSegment(value);
      expect(encoded).toMatch(/^([A-Za-z0-9._~-]|%[0-9A-F]{2})*$/);
      if (wellFormed(value)) expect(decodeURIComponent(encoded)).toBe(value);
      expect(encodings.get(encoded)).toBeUndefined();
      encodings.set(encoded, value);
    }
  });
});

// A request of the method with the given values of its path template's variables: built from JSON, so that nested
// fields and 64-bit numbers need no special case, then the strings set as they are (JSON refuses a lone surrogate).
function requestOf(method: DescMethod, template: string, valueOf: (field: string, numeric: boolean) => string): Message {
  const json: JsonObject = {};
  const strings: [string[], string][] = [];
  for (const [, variable] of template.matchAll(/\{([^}=]+)(=[^}]*)?\}/g)) {
    let desc: DescMessage = method.input;
    let target = json;
    const names: string[] = [];
    const parts = variable!.split(".");
    parts.forEach((part, i) => {
      const field = desc.fields.find((f) => f.name === part)!;
      names.push(field.localName);
      if (i < parts.length - 1) {
        target = (target[field.jsonName] ??= {}) as JsonObject;
        desc = field.message!;
        return;
      }
      const numeric = field.fieldKind === "scalar" && field.scalar !== ScalarType.STRING;
      const value = valueOf(variable!, numeric);
      target[field.jsonName] = numeric ? value : "";
      if (!numeric) strings.push([names, value]);
    });
  }
  const request = fromJson(method.input, json);
  for (const [names, value] of strings) {
    let holder = request as unknown as Record<string, unknown>;
    for (const name of names.slice(0, -1)) holder = holder[name] as Record<string, unknown>;
    holder[names.at(-1)!] = value;
  }
  return request;
}

const audited = apiServices.flatMap((s) => s.methods).filter((m) => policyOf(m).audited);
const withIds = audited.filter((m) => resourceTemplateOf(m).includes("{"));

describe("the resource of every audited method, generated from the descriptors", () => {
  const routes = new RouteTable(methodTableOf(apiServices));

  it("covers the methods that name ids in their path: KMS keys and versions, node pools, tasks, vApps", () => {
    expect(withIds.map((m) => m.name)).toEqual(
      expect.arrayContaining(["Encrypt", "Decrypt", "GetCryptoKey", "UpdateCryptoKey", "DisableCryptoKeyVersion", "CreateNodePool", "DeleteNodePool", "WaitTask", "InstantiateVAppTemplate"]),
    );
  });

  for (const method of withIds) {
    const template = resourceTemplateOf(method);
    const route = routes.routes.find((r) => r.template.source === template)!;

    it(`${method.parent.name}.${method.name}: ${template} is the REST path that names exactly the request's ids, whatever they are`, () => {
      for (const hostile of HOSTILE.filter((h) => wellFormed(h))) {
        // Each variable in turn hostile, the others plain.
        for (const [, target] of template.matchAll(/\{([^}=]+)\}/g)) {
          const values: Record<string, string> = {};
          const request = requestOf(method, template, (field, numeric) => (values[field] = numeric ? "1" : field === target ? hostile : "plain-id"));
          const resource = policyOf(method).resource(request);
          const found = routes.lookup(route.httpMethod, resource);
          expect(found.kind === "found" ? { route: found.route.template.source, values: found.pathValues } : found.kind, resource).toEqual({
            route: template,
            values: route.template.variables.map((v) => values[v.fieldPath]),
          });
        }
      }
    });

    it(`${method.parent.name}.${method.name}: a hostile id puts the call under no real resource it does not name`, () => {
      // The paths of the victim's resources in every template of every service: all their ids the victim's, numbers 1.
      const real = apiServices
        .flatMap((s) => s.methods)
        .filter((m) => resourceTemplateOf(m).includes("{"))
        .map((m) => policyOf(m).resource(requestOf(m, resourceTemplateOf(m), (_, numeric) => (numeric ? "1" : VICTIM))));
      const under = (resource: string): string[] => {
        const record: AuditRecord = { at: 0, principal: "p", method: method.name, protocol: "rest", scope: "", resource, code: 5, requestId: "r" };
        return real.filter((path) => recordMatches(record, { resource: path, limit: 1 }));
      };
      // Beside the list above, the rest of every real path from the victim's id on ("<victim>/node-pools/<victim>"),
      // but the id alone, which names the victim.
      const forging = [...HOSTILE, ...real.map((path) => path.slice(path.indexOf(VICTIM))).filter((rest) => rest !== VICTIM)];
      // Each variable in turn hostile, the others the victim's: the call is under what the same call with a plain
      // id there is under, and nothing more.
      for (const [, target] of template.matchAll(/\{([^}=]+)\}/g)) {
        const resourceWith = (id: string): string => policyOf(method).resource(requestOf(method, template, (field, numeric) => (numeric ? "1" : field === target ? id : VICTIM)));
        const plain = under(resourceWith("other-id"));
        for (const hostile of forging) expect(under(resourceWith(hostile)), resourceWith(hostile)).toEqual(plain);
      }
    });
  }
});

describe("resourcePathOf", () => {
  const encrypt = KeyManagerService.method.encrypt;

  it("cuts a long path at 256 characters, never inside an escape, saying how long it was encoded", () => {
    const path = resourcePathOf(encrypt.input, "/v1/keys/{key_id}");
    const cut = path(fromJson(encrypt.input, { keyId: "/".repeat(4_000_000) }));
    // 9 + 3 * 82 = 255 characters of whole escapes, the 256th would be the "%" of the next.
    expect(cut).toBe(`/v1/keys/${"%2F".repeat(82)}...(${9 + 12_000_000} characters)`);
    const wide = path(fromJson(encrypt.input, { keyId: "\ud83d\ude00".repeat(1000) }));
    expect(wide).toMatch(/^\/v1\/keys\/(%[0-9A-F]{2})+\.\.\.\(12009 characters\)$/);
    expect(wide.indexOf("...")).toBeLessThanOrEqual(256);
    expect(path(fromJson(encrypt.input, { keyId: "a".repeat(247) }))).toBe(`/v1/keys/${"a".repeat(247)}`);
    expect(path(fromJson(encrypt.input, { keyId: "a".repeat(248) }))).toBe(`/v1/keys/${"a".repeat(247)}...(257 characters)`);
  });

  it("keeps the '/' of a multi-segment variable's value only where the value fits the variable's pattern", () => {
    const shelf = resourcePathOf(encrypt.input, "/v2/{key_id=shelves/*/items/*}");
    const at = (keyId: string): string => shelf(fromJson(encrypt.input, { keyId }));
    expect(at("shelves/s1/items/i 1")).toBe("/v2/shelves/s1/items/i%201");
    expect(at("shelves/s1/items/..")).toBe("/v2/shelves/s1/items/%2E%2E");
    // Another shape, an empty segment, a literal that differs: one segment.
    expect(at("shelves/s1/items/i1/versions/1")).toBe("/v2/shelves%2Fs1%2Fitems%2Fi1%2Fversions%2F1");
    expect(at("shelves//items/i1")).toBe("/v2/shelves%2F%2Fitems%2Fi1");
    expect(at("books/s1/items/i1")).toBe("/v2/books%2Fs1%2Fitems%2Fi1");
    const rest = resourcePathOf(encrypt.input, "/v2/{key_id=files/**}");
    expect(rest(fromJson(encrypt.input, { keyId: "files/a/b?c" }))).toBe("/v2/files/a/b%3Fc");
    expect(rest(fromJson(encrypt.input, { keyId: "other/a" }))).toBe("/v2/other%2Fa");
    expect(resourcePathOf(encrypt.input, "/v1/keys/{key_id=*}")(fromJson(encrypt.input, { keyId: "a/b" }))).toBe("/v1/keys/a%2Fb");
  });
});

describe("the operator's --resource filter", () => {
  const at = (resource: string, scope = ""): AuditRecord => ({ at: 0, principal: "p", method: "m", protocol: "rest", scope, resource, code: 0, requestId: "r" });
  const matches = (r: AuditRecord, resource: string) => recordMatches(r, { resource, limit: 1 });

  it("takes a resource and what is under it, but not an encoded id that starts alike, and a scope exactly", () => {
    expect(matches(at(`/v1/keys/${VICTIM}`), `/v1/keys/${VICTIM}`)).toBe(true);
    expect(matches(at(`/v1/keys/${VICTIM}/versions/1/disable`), `/v1/keys/${VICTIM}`)).toBe(true);
    expect(matches(at(`/v1/keys/${VICTIM}x`), `/v1/keys/${VICTIM}`)).toBe(false);
    expect(matches(at(`/v1/keys/${VICTIM}%2Fversions%2F1`), `/v1/keys/${VICTIM}`)).toBe(false);
    expect(matches(at(`/v1/keys/${VICTIM}%3Await`), `/v1/keys/${VICTIM}`)).toBe(false);
    expect(matches(at(`/v1/keys/${VICTIM}%2Fversions%2F1`), `/v1/keys/${VICTIM}%2Fversions%2F1`)).toBe(true);
    expect(matches(at("/v1/keys", "kms-namespace:nsb"), "kms-namespace:nsb")).toBe(true);
    expect(matches(at("/v1/keys", "kms-namespace:nsb/x"), "kms-namespace:nsb")).toBe(false);
    expect(matches(at("/v1/keys", "kms-namespace:nsb:x"), "kms-namespace:nsb")).toBe(false);
  });
});
