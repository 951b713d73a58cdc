import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { DescMessage, Message } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import type { ReflectMessage } from "@bufbuild/protobuf/reflect";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CreateCryptoKeyRequestSchema, EncryptRequestSchema, UpdateCryptoKeyRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import { MAX_EXTRA_VALUES, limitsOf } from "../../src/pipeline/message-limits.js";
import type { MessageLimits } from "../../src/pipeline/message-limits.js";
import { WireCount, countWire, countWireInTurns } from "../../src/transport/limits/wire-count.js";
import { NodeDesc, SampleDesc } from "./limits-fixture.js";

const CREATE = limitsOf(CreateCryptoKeyRequestSchema);
const UPDATE = limitsOf(UpdateCryptoKeyRequestSchema);
const SAMPLE = limitsOf(SampleDesc);
const NODE = limitsOf(NodeDesc);

function violationsOf(limits: MessageLimits, bytes: Uint8Array) {
  return countWire(limits, bytes)?.violations() ?? [];
}

// A varint, as protobuf writes tags and lengths.
function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

const tag = (no: number, wire: number) => varint(no * 8 + wire);
const delimited = (no: number, payload: number[] | Uint8Array) => [...tag(no, 2), ...varint(payload.length), ...payload];
const text = (s: string) => [...Buffer.from(s)];

// CreateCryptoKeyRequest{parent_id: "flood", labels: n times "\0"}, as the hostile tests send it.
function labelsFlood(n: number): Buffer {
  return Buffer.concat([Buffer.from(delimited(1, text("flood"))), Buffer.alloc(n * 3).fill(Buffer.from([0x22, 1, 0]))]);
}

describe("counting a request's elements on the wire", () => {
  it("counts a large message a slice a turn, with the same verdict", async () => {
    let turns = 0;
    const counting = countWireInTurns(CREATE, labelsFlood(1_390_000));
    const ticking = (async () => {
      for (let done = false; !done; turns++) done = await Promise.race([counting.then(() => true), new Promise<boolean>((resolve) => setImmediate(() => resolve(false)))]);
    })();
    expect((await counting)?.violations()).toEqual([{ field: "labels", description: "must hold at most 64 labels, got 1390000" }]);
    await ticking;
    // 4.17 MB in slices of 256 KiB.
    expect(turns).toBeGreaterThanOrEqual(15);
  });

  it("refuses 1.39 million labels with the domain checks' words, and takes 64", () => {
    expect(violationsOf(CREATE, labelsFlood(1_390_000))).toEqual([{ field: "labels", description: "must hold at most 64 labels, got 1390000" }]);
    expect(countWire(CREATE, labelsFlood(64))).toBeNull();
    expect(violationsOf(CREATE, labelsFlood(65))).toEqual([{ field: "labels", description: "must hold at most 64 labels, got 65" }]);
  });

  it("takes every valid request of the served types within their bounds", () => {
    const labels = Array.from({ length: 64 }, (_, i) => `label-${i}`);
    const create = create_(CreateCryptoKeyRequestSchema, { parentId: "p", name: "n", labels, rotationPeriod: { seconds: 86400n } });
    expect(countWire(CREATE, toBinary(CreateCryptoKeyRequestSchema, create))).toBeNull();
    const update = create_(UpdateCryptoKeyRequestSchema, { key: { id: "k", labels, primary: { id: 3 } }, updateMask: { paths: Array(16).fill("name") } });
    expect(countWire(UPDATE, toBinary(UpdateCryptoKeyRequestSchema, update))).toBeNull();
    expect(countWire(CREATE, new Uint8Array(0))).toBeNull();
  });

  it("names nested fields by their JSON path and counts mask paths", () => {
    const update = create_(UpdateCryptoKeyRequestSchema, {
      key: { id: "k", labels: Array(65).fill("l") },
      updateMask: { paths: Array(17).fill("name") },
    });
    expect(violationsOf(UPDATE, toBinary(UpdateCryptoKeyRequestSchema, update))).toEqual([
      { field: "key.labels", description: "must hold at most 64 labels, got 65" },
      { field: "updateMask", description: "must hold at most 16 paths, got 17" },
    ]);
  });

  it("adds up the elements of a message field given twice, which protobuf merges", () => {
    const half = toBinary(UpdateCryptoKeyRequestSchema, create_(UpdateCryptoKeyRequestSchema, { key: { labels: Array(40).fill("l") }, updateMask: { paths: Array(9).fill("name") } }));
    const twice = Buffer.concat([half, half]);
    expect(fromBinary(UpdateCryptoKeyRequestSchema, twice).key?.labels).toHaveLength(80);
    expect(violationsOf(UPDATE, twice)).toEqual([
      { field: "key.labels", description: "must hold at most 64 labels, got 80" },
      { field: "updateMask", description: "must hold at most 16 paths, got 18" },
    ]);
  });

  it("counts unknown fields and fields given more than once against one bound", () => {
    const unknown = (n: number) => Buffer.alloc(n * 3).fill(Buffer.from([0xf8, 0x07, 0])); // field 127, varint 0
    expect(countWire(CREATE, unknown(MAX_EXTRA_VALUES))).toBeNull();
    expect(violationsOf(CREATE, unknown(1_333_333))).toEqual([{ field: "", description: "must hold at most 1000 unknown fields or fields given more than once, got 1333333" }]);
    // parent_id once, then 1,001 times more.
    const repeated = Buffer.alloc(1_002 * 3).fill(Buffer.from(delimited(1, text("p"))));
    expect(violationsOf(CREATE, repeated)).toEqual([{ field: "", description: "must hold at most 1000 unknown fields or fields given more than once, got 1001" }]);
  });

  it("reads a declared field as protobuf-es does, whatever the wire type of its tag", () => {
    // labels (field 4) tagged as fixed64: protobuf-es reads a string all the same (an empty one here), and then
    // the flood. Skipping 8 bytes by the wire type would lose step with the decoder.
    const flood = Buffer.concat([Buffer.from([...tag(4, 1), 0]), labelsFlood(1_000)]);
    expect(fromBinary(CreateCryptoKeyRequestSchema, flood).labels).toHaveLength(1_001);
    expect(violationsOf(CREATE, flood)).toEqual([{ field: "labels", description: "must hold at most 64 labels, got 1001" }]);
  });

  it("follows a nested message past its declared length, as protobuf-es does", () => {
    // key {length 2: labels "abcde"}: the label runs 5 bytes past the key's end; the parent goes on from there.
    const overrun = [...tag(1, 2), 2, ...tag(6, 2), 5, ...text("abcde")];
    const more = delimited(1, Array(64).fill(delimited(6, text("l"))).flat());
    const bytes = new Uint8Array([...overrun, ...more]);
    expect(fromBinary(UpdateCryptoKeyRequestSchema, bytes).key?.labels).toHaveLength(65);
    expect(violationsOf(UPDATE, bytes)).toEqual([{ field: "key.labels", description: "must hold at most 64 labels, got 65" }]);
  });

  it("counts packed and unpacked numbers, map entries, and the fields of list elements and map values", () => {
    const packedNums = delimited(1, [1, 2, 3, 4, 5]);
    const oneNum = [...tag(1, 0), 9];
    expect(violationsOf(SAMPLE, new Uint8Array([...packedNums, ...oneNum]))).toEqual([{ field: "nums", description: "must hold at most 5 nums, got 6" }]);
    const fixeds = delimited(6, Array(32).fill(0));
    expect(violationsOf(SAMPLE, new Uint8Array(fixeds))).toEqual([{ field: "fixeds", description: "must hold at most 3 fixeds, got 4" }]);

    const inner = (tags: number) => Array(tags).fill(delimited(1, text("t"))).flat();
    const entry = (key: string, tags: number) => delimited(2, [...delimited(1, text(key)), ...delimited(2, inner(tags))]);
    const bytes = new Uint8Array([
      ...entry("a", 1),
      ...entry("b", 3),
      ...entry("c", 0),
      ...entry("d", 0),
      ...delimited(3, inner(0)),
      ...delimited(3, inner(3)),
      ...delimited(3, inner(9)),
      ...delimited(4, inner(2)),
      ...delimited(4, inner(1)),
      ...delimited(5, [...delimited(1, text("a")), ...delimited(1, text("b")), ...delimited(1, text("c"))]),
      ...delimited(8, [...delimited(1, text("k")), ...delimited(2, text("v"))]),
    ]);
    const decoded = fromBinary(SampleDesc, bytes) as Message & Record<string, unknown>;
    expect(Object.keys(decoded["innerByKey"] as object)).toHaveLength(4);
    expect(violationsOf(SAMPLE, bytes)).toEqual([
      { field: "innerByKey[1].tags", description: "must hold at most 2 tags, got 3" },
      { field: "inners[1].tags", description: "must hold at most 2 tags, got 3" },
      // The third element is over the list's bound: the list is refused, its elements no longer looked into.
      { field: "innerByKey", description: "must hold at most 3 inner by key, got 4" },
      { field: "inners", description: "must hold at most 2 inners, got 3" },
      { field: "one.tags", description: "must hold at most 2 tags, got 3" },
      { field: "mask", description: "must hold at most 2 paths, got 3" },
    ]);
  });

  it("stops where protobuf-es would fail, with what it counted so far, and never throws", () => {
    const flood = labelsFlood(1_000);
    for (let cut = 0; cut <= 40; cut++) expect(() => countWire(CREATE, flood.subarray(0, cut))).not.toThrow();
    // Cut in the middle of the 1,000th label: 999 counted, and fromBinary fails on the rest.
    const cut = flood.subarray(0, flood.length - 1);
    expect(() => fromBinary(CreateCryptoKeyRequestSchema, cut)).toThrow();
    expect(violationsOf(CREATE, cut)).toEqual([{ field: "labels", description: "must hold at most 64 labels, got 999" }]);
    const broken = [
      [0x00], // field number 0
      [0x0f], // wire type 7
      [0xff, 0xff, 0xff, 0xff, 0xff, 0x01], // tag of 6 bytes
      [0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f], // a length of 4 GiB
      [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], // varint of 11 bytes
      [0xfb, 0x07], // unknown group never ended
      [...Array(200).fill([0xfb, 0x07]).flat()], // unknown groups nested too deep
      [0xfc, 0x07], // end of a group that never started
    ];
    for (const bytes of broken) {
      expect(() => fromBinary(CreateCryptoKeyRequestSchema, new Uint8Array(bytes))).toThrow();
      expect(countWire(CREATE, new Uint8Array(bytes))).toBeNull();
    }
    // Nested messages of a recursive type: 99 levels below the request decode and are counted; 100 are past
    // protobuf-es's recursion limit.
    const node = (levels: number, tags: number) => {
      let nested: number[] = Array(tags).fill(delimited(2, text("t"))).flat();
      for (let i = 0; i < levels; i++) nested = delimited(1, nested);
      return new Uint8Array(nested);
    };
    // The path, cut as every violation's field is.
    const deepest = `${`${Array(99).fill("next").join(".")}.tags`.slice(0, 128)}...`;
    expect(fromBinary(NodeDesc, node(99, 3))).toBeDefined();
    expect(violationsOf(NODE, node(99, 3))).toEqual([{ field: deepest, description: "must hold at most 2 tags, got 3" }]);
    expect(() => fromBinary(NodeDesc, node(100, 3))).toThrow();
    expect(countWire(NODE, node(100, 3))).toBeNull();
  });

  // The property the count exists for: whatever the bytes, a message it lets through either fails to decode or
  // decodes within every bound (so that decoding it cost little); and it never throws.
  it("lets through only what decodes within bounds or not at all (fast-check)", () => {
    const record = fc.oneof(
      fc.tuple(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 0, max: 5 }), fc.uint8Array({ maxLength: 12 })).map(([no, wire, rest]) => [...tag(no, wire), ...rest]),
      fc.tuple(fc.integer({ min: 1, max: 9 }), fc.uint8Array({ maxLength: 12 })).map(([no, payload]) => delimited(no, payload)),
      fc.integer({ min: 1, max: 9 }).map((no) => delimited(no, [])),
    );
    const nestedRecord = fc.tuple(fc.integer({ min: 1, max: 8 }), fc.array(record, { maxLength: 6 })).map(([no, inner]) => delimited(no, inner.flat()));
    const message = fc.array(fc.oneof(record, nestedRecord, nestedRecord.map((r) => Array(40).fill(r).flat())), { maxLength: 30 }).map((rs) => new Uint8Array(rs.flat()));
    const anyBytes = fc.uint8Array({ maxLength: 200 });
    for (const desc of [SampleDesc, NodeDesc, CreateCryptoKeyRequestSchema, UpdateCryptoKeyRequestSchema, EncryptRequestSchema] as DescMessage[]) {
      const limits = limitsOf(desc);
      fc.assert(
        fc.property(fc.oneof(message, anyBytes), fc.integer({ min: 1, max: 40 }), (bytes, slice) => {
          const verdict = countWire(limits, bytes);
          // Counted a slice at a time (as countWireInTurns does, a turn each), the verdict is the same.
          const sliced = new WireCount(limits, bytes);
          while (!sliced.step(slice));
          expect(sliced.verdict()?.violations()).toEqual(verdict?.violations());
          if (verdict !== null) return;
          let decoded: Message;
          try {
            decoded = fromBinary(desc, bytes);
          } catch {
            return;
          }
          expect(overBounds(reflect(desc, decoded), "")).toEqual([]);
        }),
        { numRuns: 3_000 },
      );
    }
  });
});

function create_<D extends DescMessage>(desc: D, init: Parameters<typeof create<D>>[1]) {
  return create(desc, init);
}

// What a decoded message holds over the bounds its type declares.
function overBounds(message: ReflectMessage, path: string): string[] {
  const limits = limitsOf(message.desc);
  const over: string[] = [];
  if ((message.message.$unknown?.length ?? 0) > MAX_EXTRA_VALUES) over.push(`${path}: unknown fields`);
  for (const field of message.fields) {
    const limit = limits.byNumber.get(field.number)!;
    const at = `${path}.${field.jsonName}`;
    if (field.fieldKind === "list") {
      const list = message.get(field);
      if (list.size > limit.max) over.push(at);
      if (field.listKind === "message") for (const item of list) over.push(...overBounds(item as ReflectMessage, at));
    } else if (field.fieldKind === "map") {
      const map = message.get(field);
      if (map.size > limit.max) over.push(at);
      if (field.mapKind === "message") for (const [, value] of map) over.push(...overBounds(value as ReflectMessage, at));
    } else if (field.fieldKind === "message" && message.isSet(field)) {
      const child = message.get(field);
      if (limit.mask) {
        if ((child.message as unknown as { paths: string[] }).paths.length > limit.max) over.push(at);
      } else over.push(...overBounds(child, at));
    }
  }
  return over;
}
