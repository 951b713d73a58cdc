import { ScalarType, getOption, hasOption } from "@bufbuild/protobuf";
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import { hasCustomJsonRepresentation } from "@bufbuild/protobuf/wkt";
import { max_items } from "../../gen/cloudplane/api/v1/policy_pb.js";

// How many elements each repeated and map field of a request message may hold, read from the descriptors at
// start-up: every such field declares (cloudplane.api.v1.max_items) in proto/, and a request type with one that
// does not is refused when the server starts, as a method without a policy is. The adapters count the elements
// of a request on the wire (src/transport/limits/) before they decode it, so that a request of a million
// elements costs a scan of its bytes, not the decoding of a million strings.

// Fields a request may carry beyond what its type declares: unknown fields, and singular fields given more than
// once (protobuf takes the last; JSON parsers too). Legitimate requests have a few at most; a million of them
// cost protobuf-es 0.3 s to keep as unknown fields.
export const MAX_EXTRA_VALUES = 1_000;

// How deep the counters follow nested messages: protobuf-es's recursion limit, past which decoding fails anyway.
export const MAX_MESSAGE_DEPTH = 100;

// How one value of a field (one element of a list, one entry of a map) is encoded, as the binary counter reads it.
export const ENCODING_BYTES = 0; // string, bytes: a length and the bytes
export const ENCODING_VARINT = 1; // integers, bool, enum
export const ENCODING_FIXED32 = 2; // fixed32, sfixed32, float
export const ENCODING_FIXED64 = 3; // fixed64, sfixed64, double
export const ENCODING_MESSAGE = 4; // a length and the message's fields
export const ENCODING_MASK = 5; // a google.protobuf.FieldMask, whose paths are counted
export const ENCODING_MAP_ENTRY = 6; // a length, the key and the value
export type Encoding = 0 | 1 | 2 | 3 | 4 | 5 | 6;

export interface FieldLimit {
  readonly field: DescField;
  // Position of the field in its message, for the "given more than once" check.
  readonly index: number;
  // A list or a map: its elements are counted against `max`.
  readonly repeated: boolean;
  readonly list: boolean;
  readonly encoding: Encoding;
  // A list whose elements may come packed in one record (numbers, bools, enums).
  readonly packable: boolean;
  // A google.protobuf.FieldMask: its paths are counted against `max`.
  readonly mask: boolean;
  // max_items; 0 for a field that is neither repeated nor a mask.
  readonly max: number;
  // What the elements are called in a refusal: "labels", "paths".
  readonly noun: string;
  // The message of the field, of its elements or of its map values, when it has fields to look into; null for
  // scalars and for messages with a JSON form of their own (Timestamp, Duration ...) in JSON, see `jsonOpaque`.
  readonly message: MessageLimits | null;
  // In JSON the value is not an object of the message's fields (a well-known type written as a string).
  readonly jsonOpaque: boolean;
}

export interface MessageLimits {
  readonly desc: DescMessage;
  readonly byNumber: ReadonlyMap<number, FieldLimit>;
  // The same by index, up to the highest field number, when that is small (a Map lookup per record was a third of
  // the time of counting 1.39 million labels); null otherwise.
  readonly numbered: readonly (FieldLimit | undefined)[] | null;
  // By JSON name and by proto name, as proto-JSON parsers accept both.
  readonly byName: ReadonlyMap<string, FieldLimit>;
  readonly fieldCount: number;
}

const MAX_NUMBERED = 4096;

const cache = new WeakMap<DescMessage, MessageLimits>();

// The longest field name (proto or JSON) a request type may have. The JSON count reads only the start of a member
// name too long to be one of them (src/transport/limits/json-count.ts), so a longer name is refused at start-up.
export const MAX_FIELD_NAME_CHARS = 256;

// The limits of a request message and of every message it holds. Throws for a repeated or map field without
// max_items, for max_items on a field that is neither repeated nor a FieldMask, and for a repeated field of a
// message type of which nobody declared the bounds (google.protobuf.Struct, ListValue ...).
export function limitsOf(desc: DescMessage): MessageLimits {
  return build(desc, desc.typeName);
}

function build(desc: DescMessage, where: string): MessageLimits {
  const cached = cache.get(desc);
  if (cached !== undefined) return cached;
  const byNumber = new Map<number, FieldLimit>();
  const byName = new Map<string, FieldLimit>();
  const highest = Math.max(0, ...desc.fields.map((f) => f.number));
  const numbered = highest <= MAX_NUMBERED ? new Array<FieldLimit | undefined>(highest + 1).fill(undefined) : null;
  const limits: MessageLimits = { desc, byNumber, numbered, byName, fieldCount: desc.fields.length };
  // Before the fields: a recursive type refers to itself.
  cache.set(desc, limits);
  try {
    desc.fields.forEach((field, index) => {
      if (Math.max(field.name.length, field.jsonName.length) > MAX_FIELD_NAME_CHARS) {
        throw new Error(`${where}.${field.name}: field names of more than ${MAX_FIELD_NAME_CHARS} characters are not supported`);
      }
      const limit = fieldLimitOf(field, index, `${where}.${field.name}`);
      byNumber.set(field.number, limit);
      if (numbered !== null) numbered[field.number] = limit;
      byName.set(field.name, limit).set(field.jsonName, limit);
    });
  } catch (err) {
    cache.delete(desc);
    throw err;
  }
  return limits;
}

function fieldLimitOf(field: DescField, index: number, where: string): FieldLimit {
  const declared = hasOption(field, max_items) ? getOption(field, max_items) : undefined;
  const repeated = field.fieldKind === "list" || field.fieldKind === "map";
  const mask = field.fieldKind === "message" && field.message.typeName === "google.protobuf.FieldMask";
  if ((repeated || mask) && (declared === undefined || declared < 1)) {
    throw new Error(`${where} is a request field of ${repeated ? "many elements" : "many paths"} and declares no (cloudplane.api.v1.max_items)`);
  }
  if (!repeated && !mask && declared !== undefined) {
    throw new Error(`${where} declares (cloudplane.api.v1.max_items) but is neither repeated, a map nor a FieldMask`);
  }
  // The wire counters read messages by length only; proto3 has no groups.
  if ("delimitedEncoding" in field && field.delimitedEncoding === true) throw new Error(`${where} uses the group (delimited) encoding, which the request counters do not read`);
  const inner = innerMessage(field);
  return {
    field,
    index,
    repeated,
    mask,
    max: declared ?? 0,
    noun: mask ? "paths" : field.name.replaceAll("_", " "),
    list: field.fieldKind === "list",
    encoding: mask ? ENCODING_MASK : encodingOf(field),
    packable: field.fieldKind === "list" && (field.listKind === "enum" || (field.listKind === "scalar" && !isBytesLike(field.scalar))),
    // A FieldMask's one field is its paths, counted by the field that holds it.
    message: inner === undefined || mask ? null : build(inner, where),
    jsonOpaque: inner !== undefined && hasCustomJsonRepresentation(inner),
  };
}

const smallest = new WeakMap<MessageLimits, number>();

// The smallest number of elements, paths or extra values that a request of this type may not exceed: the least
// max_items of every field it can hold, nested messages included, or MAX_EXTRA_VALUES. Every one of them takes at
// least two bytes of JSON (a value and its comma, or a path and its comma), and so a JSON body of fewer than
// 2 * (bound + 1) bytes is within every limit of its type whatever it holds: the REST adapter parses such small
// bodies without counting them first (src/transport/rest/request-builder.ts).
export function smallestBoundOf(limits: MessageLimits): number {
  const known = smallest.get(limits);
  if (known !== undefined) return known;
  let least = MAX_EXTRA_VALUES;
  const seen = new Set<MessageLimits>();
  const visit = (m: MessageLimits): void => {
    if (seen.has(m)) return;
    seen.add(m);
    for (const f of m.byNumber.values()) {
      if (f.max > 0) least = Math.min(least, f.max);
      if (f.message !== null) visit(f.message);
    }
  };
  visit(limits);
  smallest.set(limits, least);
  return least;
}

function innerMessage(field: DescField): DescMessage | undefined {
  switch (field.fieldKind) {
    case "message":
      return field.message;
    case "list":
      return field.listKind === "message" ? field.message : undefined;
    case "map":
      return field.mapKind === "message" ? field.message : undefined;
    default:
      return undefined;
  }
}

function encodingOf(field: DescField): Encoding {
  switch (field.fieldKind) {
    case "map":
      return ENCODING_MAP_ENTRY;
    case "message":
      return ENCODING_MESSAGE;
    case "enum":
      return ENCODING_VARINT;
    case "scalar":
      return scalarEncoding(field.scalar);
    case "list":
      if (field.listKind === "message") return ENCODING_MESSAGE;
      return field.listKind === "enum" ? ENCODING_VARINT : scalarEncoding(field.scalar);
  }
}

export function scalarEncoding(scalar: ScalarType): Encoding {
  switch (scalar) {
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return ENCODING_BYTES;
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
    case ScalarType.FLOAT:
      return ENCODING_FIXED32;
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
    case ScalarType.DOUBLE:
      return ENCODING_FIXED64;
    default:
      return ENCODING_VARINT;
  }
}

function isBytesLike(scalar: ScalarType): boolean {
  return scalar === ScalarType.STRING || scalar === ScalarType.BYTES;
}

const bounded = new WeakMap<MessageLimits, boolean>();

// Whether the message, or a message within it, has a field with a bound (a list, a map, a FieldMask). A message
// without one can only go over MAX_EXTRA_VALUES, which takes a message of some size.
// Asked on every call: the answer is kept, and a set of the messages seen is made only for a walk.
export function holdsBounds(limits: MessageLimits): boolean {
  let known = bounded.get(limits);
  if (known === undefined) {
    // A walk from here reaches every message within this one, so its answer is whole even where a cycle cut it
    // short below.
    known = findBounds(limits, new Set());
    bounded.set(limits, known);
  }
  return known;
}

function findBounds(limits: MessageLimits, seen: Set<MessageLimits>): boolean {
  const known = bounded.get(limits);
  if (known !== undefined) return known;
  if (seen.has(limits)) return false;
  seen.add(limits);
  let found = false;
  for (const limit of limits.byNumber.values()) {
    if (limit.max > 0 || (limit.message !== null && findBounds(limit.message, seen))) {
      found = true;
      break;
    }
  }
  // Only a full answer is kept: within a cycle, `false` may just mean "not found yet".
  if (found || seen.size === 1) bounded.set(limits, found);
  return found;
}

// A bound declared in proto/, for the domain checks that repeat it (kms/request-validation.ts).
export function maxItemsOf(field: DescField): number {
  const max = getOption(field, max_items);
  if (max < 1) throw new Error(`${field.parent.typeName}.${field.name} declares no (cloudplane.api.v1.max_items)`);
  return max;
}
