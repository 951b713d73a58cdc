import { fromJson } from "@bufbuild/protobuf";
import type { DescMessage, JsonValue } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import type { ReflectMessage } from "@bufbuild/protobuf/reflect";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CreateCryptoKeyRequestSchema, EncryptRequestSchema, UpdateCryptoKeyRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import { MAX_EXTRA_VALUES, MAX_FIELD_NAME_CHARS, limitsOf, smallestBoundOf } from "../../src/pipeline/message-limits.js";
import type { MessageLimits } from "../../src/pipeline/message-limits.js";
import { UnknownJsonField, countJson } from "../../src/transport/limits/json-count.js";
import { statusPartsOf } from "../../src/errors/status-details.js";
import { unknownField } from "../../src/transport/rest/json-check.js";
import type { JsonCountOptions } from "../../src/transport/limits/json-count.js";
import { SampleDesc } from "./limits-fixture.js";

const CREATE = limitsOf(CreateCryptoKeyRequestSchema);
const UPDATE = limitsOf(UpdateCryptoKeyRequestSchema);
const SAMPLE = limitsOf(SampleDesc);
const COUNT: JsonCountOptions = { unknownFields: "count" };
const REFUSE: JsonCountOptions = { unknownFields: "refuse" };

function count(limits: MessageLimits, body: string, options = COUNT) {
  return countJson(limits, Buffer.from(body), options);
}

function violationsOf(limits: MessageLimits, body: string, options = COUNT) {
  const verdict = count(limits, body, options);
  if (verdict instanceof UnknownJsonField) throw new Error(`unknown field ${verdict.path}`);
  return verdict?.violations() ?? [];
}

const extra = (n: number) => [{ field: "", description: `must hold at most 1000 unknown fields or fields given more than once, got ${n}` }];
const items = (n: number, item: string) => Array(n).fill(item).join(",");

describe("counting a JSON request's elements before parsing it", () => {
  it("refuses 460,000 labels with the domain checks' words, and takes 64", () => {
    expect(violationsOf(CREATE, `{"parentId":"flood","labels":[${items(460_000, '"\\u0000"')}]}`)).toEqual([
      { field: "labels", description: "must hold at most 64 labels, got 460000" },
    ]);
    expect(count(CREATE, `{"parentId":"flood","labels":[${items(64, '"a"')}]}`)).toBeNull();
    expect(count(CREATE, ` { "labels" : [ ${items(64, ' "a" ')} ] , "parent_id" : "p" } `)).toBeNull();
    expect(violationsOf(CREATE, `{"labels":[${items(65, "1")}]}`)).toEqual([{ field: "labels", description: "must hold at most 64 labels, got 65" }]);
    expect(count(CREATE, `{"labels":[]}`)).toBeNull();
    expect(count(CREATE, `{"labels":null}`)).toBeNull();
  });

  it("names nested fields by their JSON path, and counts a mask's comma-separated paths", () => {
    const body = JSON.stringify({ key: { labels: Array(65).fill("l") }, updateMask: Array(17).fill("name").join(",") });
    expect(violationsOf(UPDATE, body)).toEqual([
      { field: "key.labels", description: "must hold at most 64 labels, got 65" },
      { field: "updateMask", description: "must hold at most 16 paths, got 17" },
    ]);
    expect(count(UPDATE, JSON.stringify({ updateMask: Array(16).fill("name").join(",") }))).toBeNull();
    expect(count(UPDATE, `{"updateMask":""}`)).toBeNull();
    // Commas written as escapes are commas all the same.
    expect(violationsOf(UPDATE, `{"updateMask":"${Array(17).fill("name").join("\\u002c")}"}`)).toEqual([{ field: "updateMask", description: "must hold at most 16 paths, got 17" }]);
  });

  it("refuses the first unknown member by its path when asked to (REST), and counts them otherwise (Connect)", () => {
    const body = `{"parentId":"p","f0":0,"f1":{"a":[1,2]}}`;
    const refused = count(CREATE, body, REFUSE);
    expect(refused).toBeInstanceOf(UnknownJsonField);
    expect(refused).toMatchObject({ path: "f0", name: "f0", typeName: "kms.v1.CreateCryptoKeyRequest" });
    expect(count(UPDATE, `{"key":{"name":"n","\\u0062ogus":1}}`, REFUSE)).toMatchObject({ path: "key.bogus", name: "bogus", typeName: "kms.v1.CryptoKey" });
    expect(count(CREATE, body)).toBeNull();
    const many = `{"parentId":"p",${Array.from({ length: 300_000 }, (_, i) => `"f${i}":0`).join(",")}}`;
    expect(violationsOf(CREATE, many)).toEqual(extra(300_000));
    expect(count(CREATE, `{${Array.from({ length: MAX_EXTRA_VALUES }, (_, i) => `"f${i}":0`).join(",")}}`)).toBeNull();
  });

  it("reads only the start of a member name too long to be a field's, and refuses it in the same words as the whole name", () => {
    const names = [
      "k".repeat(3_000_000),
      `\\u202e${"k".repeat(5_000)}`,
      "\\u006b".repeat(2_000),
      "\\\\\\n\\t\\\"".repeat(1_000),
      "é".repeat(3_000),
      "😀".repeat(1_000),
      // The start read ends inside a run of characters of several bytes, or of two UTF-16 units.
      `${"k".repeat(255)}${"😀".repeat(400)}`,
      `${"k".repeat(256)}${"é".repeat(800)}`,
    ];
    for (const raw of names) {
      const whole = JSON.parse(`"${raw}"`) as string;
      const refused = count(CREATE, `{"parentId":"p","${raw}":0}`, REFUSE);
      if (!(refused instanceof UnknownJsonField)) throw new Error(`not refused as unknown: ${raw.slice(0, 20)}`);
      // Longer than any field name, so it matches none; a start of the whole name, cut between two characters.
      expect(refused.name.length).toBeGreaterThan(MAX_FIELD_NAME_CHARS);
      expect(refused.name.length).toBeLessThan(MAX_FIELD_NAME_CHARS + 8);
      expect(whole.startsWith(refused.name)).toBe(true);
      expect(refused.name).not.toContain("\uFFFD");
      const answered = (path: string, name: string) => statusPartsOf(unknownField(path, name, "kms.v1.CreateCryptoKeyRequest").toDomainError("kms"));
      expect(answered(refused.path, refused.name)).toEqual(answered(whole, whole));
      // Connect counts it as one value beyond the type's fields, as any unknown member.
      expect(count(CREATE, `{"parentId":"p","${raw}":0}`)).toBeNull();
    }
  });

  it("stops at a long member name that stops being JSON, however far into it, as reading all of it did", () => {
    for (const bad of ["\\x", "\u0001", "\\u12G4", "\\u12", "\u001f"]) {
      const body = `{"parentId":"p","${"k".repeat(10_000)}${bad}k":0}`;
      expect(() => JSON.parse(body)).toThrow();
      expect(count(CREATE, body, REFUSE)).toBeNull();
      expect(count(CREATE, body)).toBeNull();
    }
    // Where the text stops, the labels before it are still counted.
    const over = `{"labels":[${items(65, '"a"')}],"${"k".repeat(10_000)}\\x":0}`;
    expect(violationsOf(CREATE, over, REFUSE)).toEqual([{ field: "labels", description: "must hold at most 64 labels, got 65" }]);
  });

  it("counts fields given twice, and arrays or objects where the type has none, with all they hold", () => {
    expect(count(CREATE, `{"parentId":"a","parent_id":"b"}`)).toBeNull();
    expect(violationsOf(CREATE, `{${items(2_000, '"parentId":"x"')}}`)).toEqual(extra(1_999));
    expect(violationsOf(CREATE, "[".repeat(2_000_000) + "]".repeat(2_000_000))).toEqual(extra(2_000_001));
    expect(violationsOf(CREATE, `{"labels":[${"[".repeat(5_000)}${"]".repeat(5_000)}]}`)).toEqual(extra(5_000));
    expect(violationsOf(CREATE, `{"parentId":{"a":[${items(2_000, "0")}]}}`)).toEqual(extra(2_002));
  });

  it("counts lists and maps of messages element by element, and the rest of one over its bound", () => {
    const body = JSON.stringify({
      innerByKey: { a: { tags: ["1"] }, "b\"": { tags: ["1", "2", "3"] }, c: {}, d: {} },
      inners: [{}, { tags: ["1", "2", "3"] }, { tags: Array(9).fill("x") }],
      one: { tags: ["1", "2", "3"] },
      mask: "a,b,c",
      tags: { k: "v", l: "w", m: "x" },
      nums: [1, 2, 3, 4, 5, 6],
    });
    expect(violationsOf(SAMPLE, body)).toEqual([
      { field: 'innerByKey["b\\""].tags', description: "must hold at most 2 tags, got 3" },
      { field: "inners[1].tags", description: "must hold at most 2 tags, got 3" },
      { field: "nums", description: "must hold at most 5 nums, got 6" },
      { field: "innerByKey", description: "must hold at most 3 inner by key, got 4" },
      { field: "inners", description: "must hold at most 2 inners, got 3" },
      { field: "one.tags", description: "must hold at most 2 tags, got 3" },
      { field: "mask", description: "must hold at most 2 paths, got 3" },
      { field: "tags", description: "must hold at most 2 tags, got 3" },
    ]);
    expect(violationsOf(SAMPLE, JSON.stringify({ inners: Array(100_000).fill({ tags: ["a"] }) }))).toEqual([
      { field: "inners", description: "must hold at most 2 inners, got 100000" },
    ]);
  });

  it("counts a body that is one field of the request (REST's body: \"field\")", () => {
    const labels = CREATE.byName.get("labels")!;
    expect(violationsOf(CREATE, `[${items(65, '"a"')}]`, { unknownFields: "refuse", field: labels })).toEqual([{ field: "labels", description: "must hold at most 64 labels, got 65" }]);
  });

  it("stops where the text stops being JSON, and never throws", () => {
    const body = JSON.stringify({ parentId: "p", labels: Array(100).fill("a\\\"b"), key: { labels: ["x"] } });
    for (let cut = 0; cut <= body.length; cut++) expect(() => count(UPDATE, body.slice(0, cut))).not.toThrow();
    for (const garbage of ["", "}", "]", ":", ",", '"', '{"a"', '{"a":', '{"labels":[1,', "nul", "[", "{{", '{"key":{"labels":[[[', "\u0000"]) {
      expect(() => count(UPDATE, garbage, REFUSE)).not.toThrow();
    }
    fc.assert(fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => void countJson(SAMPLE, bytes, COUNT)), { numRuns: 5_000 });
  });

  // What lets the REST adapter parse small bodies without counting them (src/transport/rest/request-builder.ts):
  // every element, path or extra value takes at least two bytes, so no body shorter than 2 * (bound + 1) bytes can
  // exceed a limit, whatever it holds; and the shortest bodies that do exceed one are just that long.
  it("finds no body shorter than twice the smallest bound plus two over a limit (fast-check)", () => {
    expect(smallestBoundOf(SAMPLE)).toBe(2);
    expect(smallestBoundOf(CREATE)).toBe(64);
    expect(smallestBoundOf(UPDATE)).toBe(16);
    expect(smallestBoundOf(limitsOf(EncryptRequestSchema))).toBe(MAX_EXTRA_VALUES);
    // The shortest bodies over a bound: three tags of the inner message where two are allowed, 17 paths, 1,001
    // values beyond the fields.
    expect(count(SAMPLE, '{"one":{"tags":["","",""]}}')).not.toBeNull();
    expect(count(UPDATE, `{"updateMask":"${Array(17).fill("a").join(",")}"}`)).not.toBeNull();
    expect(count(limitsOf(EncryptRequestSchema), `{"x":[${Array(1001).fill(0).join(",")}]}`)).not.toBeNull();
    for (const limits of [SAMPLE, UPDATE]) {
      const below = 2 * (smallestBoundOf(limits) + 1) - 1;
      const byte = fc.constantFrom(..."{}[],:\"0a ".split(""), '"tags"', '"one"', '"nums"', '"updateMask"', '"key"', '"labels"');
      const text = fc.array(byte, { maxLength: below }).map((parts) => parts.join("").slice(0, below));
      fc.assert(
        fc.property(text, (body) => {
          const verdict = count(limits, body);
          expect(verdict === null || verdict instanceof UnknownJsonField).toBe(true);
        }),
        { numRuns: 5_000 },
      );
    }
  });

  // The property the count exists for: a body it lets through either fails to parse and decode, or decodes within
  // every bound and holds few values beyond its fields (so that parsing it cost little); and it never throws.
  it("lets through only what decodes within bounds, or not at all (fast-check)", () => {
    const names = (desc: DescMessage) => [...desc.fields.flatMap((f) => [f.name, f.jsonName]), "unknown"];
    for (const desc of [SampleDesc, CreateCryptoKeyRequestSchema, UpdateCryptoKeyRequestSchema] as DescMessage[]) {
      const limits = limitsOf(desc);
      const key = fc.constantFrom(...names(desc), ...names(limits.byName.values().next().value!.message?.desc ?? desc));
      const element = fc.oneof(fc.string({ maxLength: 3 }), fc.integer({ min: 0, max: 9 }), fc.object({ key, maxDepth: 1, maxKeys: 3 }), fc.jsonValue({ maxDepth: 2 }));
      const value = fc.oneof(
        fc.jsonValue({ maxDepth: 3 }),
        // Lists of one kind of element, around the bounds (2, 3, 5, 64).
        element.chain((e) => fc.array(fc.constant(e), { maxLength: 70 })),
        fc.array(element, { maxLength: 8 }),
        fc.array(fc.integer(), { minLength: 900, maxLength: 1_100 }),
        fc.object({ key, maxDepth: 3, maxKeys: 12 }),
        fc.dictionary(fc.string({ maxLength: 2 }), fc.object({ key, maxDepth: 1, maxKeys: 3 }), { maxKeys: 5 }),
        fc.array(fc.constantFrom("a", "b", "c"), { maxLength: 20 }).map((p) => p.join(",")),
      );
      const body = fc.dictionary(key, value, { maxKeys: 10 }).map((o) => JSON.stringify(o));
      const cut = fc.tuple(body, fc.nat()).map(([b, n]) => b.slice(0, n % (b.length + 1)));
      fc.assert(
        fc.property(fc.oneof(body, cut), (text) => {
          const verdict = countJson(limits, Buffer.from(text), COUNT);
          if (verdict !== null) return;
          let parsed: JsonValue;
          try {
            parsed = JSON.parse(text) as JsonValue;
          } catch {
            return;
          }
          // The values of the fields (at most 64 labels, 16 paths ... and the fields themselves), and at most
          // 1,000 beyond them.
          expect(valuesIn(parsed)).toBeLessThanOrEqual(MAX_EXTRA_VALUES + 300);
          let decoded;
          try {
            decoded = fromJson(desc, parsed, { ignoreUnknownFields: true });
          } catch {
            return;
          }
          expect(overBounds(reflect(desc, decoded))).toEqual([]);
        }),
        { numRuns: 1_000 },
      );
    }
  });
});

function valuesIn(value: JsonValue): number {
  if (Array.isArray(value)) return 1 + value.reduce<number>((n, v) => n + valuesIn(v), 0);
  if (typeof value === "object" && value !== null) return 1 + Object.values(value).reduce<number>((n, v) => n + valuesIn(v), 0);
  return 1;
}

function overBounds(message: ReflectMessage): string[] {
  const limits = limitsOf(message.desc);
  const over: string[] = [];
  for (const field of message.fields) {
    const limit = limits.byNumber.get(field.number)!;
    if (field.fieldKind === "list") {
      const list = message.get(field);
      if (list.size > limit.max) over.push(field.name);
      if (field.listKind === "message") for (const item of list) over.push(...overBounds(item as ReflectMessage));
    } else if (field.fieldKind === "map") {
      const map = message.get(field);
      if (map.size > limit.max) over.push(field.name);
      if (field.mapKind === "message") for (const [, v] of map) over.push(...overBounds(v as ReflectMessage));
    } else if (field.fieldKind === "message" && message.isSet(field)) {
      const child = message.get(field);
      if (limit.mask) {
        if ((child.message as unknown as { paths: string[] }).paths.length > limit.max) over.push(field.name);
      } else over.push(...overBounds(child));
    }
  }
  return over;
}
