import type { ViolationList } from "../../errors/violation-list.js";
import {
  ENCODING_BYTES,
  ENCODING_FIXED32,
  ENCODING_FIXED64,
  ENCODING_MAP_ENTRY,
  ENCODING_MASK,
  ENCODING_MESSAGE,
  ENCODING_VARINT,
  MAX_EXTRA_VALUES,
  MAX_MESSAGE_DEPTH,
  holdsBounds,
  scalarEncoding,
} from "../../pipeline/message-limits.js";
import type { FieldLimit, MessageLimits } from "../../pipeline/message-limits.js";
import { Tally, fieldPath, instance } from "./tally.js";
import type { Instance } from "./tally.js";

// Counts the elements of every repeated and map field of a binary request, and the fields beyond its type's, by
// walking its tags and lengths without decoding anything: 5-20 ms for 4 MB of 1.39 million labels, which
// protobuf-es's fromBinary takes 0.1-0.2 s to decode; the count can also run a slice per turn of the event loop.
//
// The walk reads every record exactly as protobuf-es's fromBinary will (from-binary.js, binary-encoding.js):
// a field the message declares is read as its type says, whatever the wire type of its tag (protobuf-es does not
// look at it, except for packed lists); an unknown field is skipped by its wire type; a nested message ends at the
// first record that reaches its declared length, even past it. Reading otherwise would let a crafted message
// look like one thing to the count and like a flood to the decoder. (Groups are read only as protobuf-es skips
// unknown ones: message-limits.ts refuses a request field of the group encoding at start-up.) Where fromBinary
// would fail (a record past the end, an invalid tag or varint, nesting too deep), the walk stops, and what it
// counted so far is the verdict: fromBinary then fails at the same place after as much work as the walk saw.

// Thrown inside the walk when fromBinary would fail at this point; never leaves WireCount.
const STOP = Symbol("wire count: malformed");

const WIRE_VARINT = 0;
const WIRE_DELIMITED = 2;
const WIRE_START_GROUP = 3;
const WIRE_END_GROUP = 4;
const WIRE_BIT32 = 5;
const WIRE_BIT64 = 1;

// How much of a message one turn of the event loop counts when the count runs in turns: 1-3 ms of a flood.
export const WIRE_SLICE_BYTES = 256 * 1024;

// Every record takes at least two bytes: a message shorter than this holds fewer than MAX_EXTRA_VALUES of them.
const UNCOUNTED_BYTES = 2 * MAX_EXTRA_VALUES;

// Null when the message is within the limits of its type, else the violations to refuse it with. Never throws.
export function countWire(limits: MessageLimits, bytes: Uint8Array): ViolationList | null {
  // Nothing to count in a small message of a type without bounds (most calls: Encrypt, Decrypt, Get...).
  if (bytes.length < UNCOUNTED_BYTES && !holdsBounds(limits)) return null;
  const count = new WireCount(limits, bytes);
  count.step(Infinity);
  return count.verdict();
}

// The same, a slice of the message a turn (setImmediate between two), so that a 4 MB message does not hold up the
// other connections for the 10-50 ms its count takes on a busy machine.
export async function countWireInTurns(limits: MessageLimits, bytes: Uint8Array): Promise<ViolationList | null> {
  if (bytes.length < UNCOUNTED_BYTES && !holdsBounds(limits)) return null;
  const count = new WireCount(limits, bytes);
  while (!count.step(WIRE_SLICE_BYTES)) await new Promise((resolve) => setImmediate(resolve));
  return count.verdict();
}

// What the walk is inside of: a message, the paths of a FieldMask, a map entry, a packed record. A stack of them
// rather than recursion, so that the walk can stop between any two records and go on in a later turn.
const FRAME_MESSAGE = 0;
const FRAME_MASK = 1;
const FRAME_MAP_ENTRY = 2;
const FRAME_PACKED = 3;

interface Frame {
  readonly kind: number;
  // Where protobuf-es stops reading it: the first record that reaches this position ends it, even past it.
  readonly end: number;
  readonly depth: number;
  // FRAME_MESSAGE: its fields; FRAME_MAP_ENTRY: its value's, when a message.
  readonly limits: MessageLimits | null;
  // FRAME_MESSAGE: the message counted (null once the field holding it is over its limit: the request is refused,
  // the walk only keeps its place); FRAME_MASK, FRAME_PACKED, FRAME_MAP_ENTRY: the message holding the field (null
  // likewise; for a map entry also when the map is over its limit).
  readonly inst: Instance | null;
  // FRAME_MASK, FRAME_PACKED, FRAME_MAP_ENTRY: the field.
  readonly limit: FieldLimit | null;
  // FRAME_MESSAGE of a list element: reported when it ends. FRAME_MAP_ENTRY: its value when a message, reported
  // when the entry ends.
  readonly report: Instance | null;
  // FRAME_MAP_ENTRY: keys and values seen (more than one of each is a field given twice).
  keys: number;
  values: number;
}

function frame(kind: number, end: number, depth: number, limits: MessageLimits | null, inst: Instance | null, limit: FieldLimit | null, report: Instance | null): Frame {
  if (depth > MAX_MESSAGE_DEPTH) throw STOP;
  return { kind, end, depth, limits, inst, limit, report, keys: 0, values: 0 };
}

// One count of one message, which can run all at once or a slice at a time.
export class WireCount {
  pos = 0;
  readonly tally = new Tally();
  readonly #root: Instance;
  readonly #stack: Frame[];
  #done = false;

  constructor(
    limits: MessageLimits,
    private readonly buf: Uint8Array,
  ) {
    this.#root = instance(limits, "");
    this.#stack = [frame(FRAME_MESSAGE, buf.length, 1, limits, this.#root, null, null)];
  }

  // Counts on for at least `bytes` more of the message (to the end of the record that crosses them); true once
  // the whole message is counted, or the walk stopped where fromBinary would fail.
  step(bytes: number): boolean {
    if (this.#done) return true;
    const until = this.pos + bytes;
    try {
      for (;;) {
        const top = this.#stack[this.#stack.length - 1];
        if (top === undefined) break;
        if (this.pos >= top.end) {
          this.#end(top);
          continue;
        }
        if (this.pos >= until) return false;
        if (top.kind === FRAME_MESSAGE) this.#message(top, until);
        else if (top.kind === FRAME_PACKED) this.#packed(top, until);
        else if (top.kind === FRAME_MASK) this.#maskPath(top);
        else this.#mapEntryField(top);
      }
    } catch (thrown) {
      if (thrown !== STOP) throw thrown;
    }
    this.#done = true;
    this.tally.report(this.#root);
    return true;
  }

  // Null when within the limits (once step has returned true).
  verdict(): ViolationList | null {
    return this.tally.verdict();
  }

  #end(top: Frame): void {
    this.#stack.pop();
    if (top.kind === FRAME_MAP_ENTRY && top.inst !== null) {
      // A key or value given twice in one entry: protobuf-es keeps the last.
      this.tally.extra += Math.max(0, top.keys - 1) + Math.max(0, top.values - 1);
    }
    if (top.report !== null) this.tally.report(top.report);
  }

  // The records of a message, until it ends, a nested one starts (pushed), or the slice is over.
  #message(top: Frame, until: number): void {
    const limits = top.limits!;
    const inst = top.inst;
    const end = top.end;
    const depth = top.depth;
    const numbered = limits.numbered;
    const buf = this.buf;
    const size = buf.length;
    while (this.pos < end && this.pos < until) {
      // The usual record, read here rather than through the methods below (a flood is a million of them, and this
      // loop is fast from its first run): a tag of one or two bytes, of a declared string, bytes or integer field
      // or of an unknown field, with a length or value of one byte.
      const pos = this.pos;
      let at = pos + 1;
      let quickTag = buf[pos]!;
      if (quickTag >= 0x80) quickTag = (quickTag & 0x7f) | (buf[at++]! << 7);
      const value = buf[at]!;
      if (quickTag < 0x4000 && quickTag >= 8 && at < size && value < 0x80) {
        const wire = quickTag & 7;
        const quick = numbered === null ? limits.byNumber.get(quickTag >>> 3) : numbered[quickTag >>> 3];
        if (quick === undefined ? wire === WIRE_VARINT || wire === WIRE_DELIMITED : quick.encoding === ENCODING_BYTES || (quick.encoding === ENCODING_VARINT && !quick.packable)) {
          const next = (quick === undefined ? wire === WIRE_DELIMITED : quick.encoding === ENCODING_BYTES) ? at + 1 + value : at + 1;
          if (next > size) throw STOP;
          if (inst !== null) {
            if (quick === undefined) this.tally.extra++;
            else if (quick.repeated) inst.counts[quick.index]!++;
            else if (inst.seen[quick.index] === 1) this.tally.extra++;
            else inst.seen[quick.index] = 1;
          }
          this.pos = next;
          continue;
        }
      }
      const tag = this.tag();
      const no = tag >>> 3;
      const limit = numbered === null ? limits.byNumber.get(no) : numbered[no];
      if (limit === undefined) {
        this.skip(tag & 7, no, MAX_MESSAGE_DEPTH - depth);
        if (inst !== null) this.tally.extra++;
        continue;
      }
      const encoding = limit.encoding;
      if (!limit.repeated) {
        // A singular field: given more than once, it is one value beyond the type's fields.
        if (inst !== null) {
          if (inst.seen[limit.index] === 1) this.tally.extra++;
          else inst.seen[limit.index] = 1;
        }
        if (encoding === ENCODING_MESSAGE) {
          // A message field given twice is merged into one, so the elements of both add up.
          const child = inst === null ? null : (inst.children[limit.index] ??= instance(limit.message!, fieldPath(inst.path, limit)));
          this.#stack.push(frame(FRAME_MESSAGE, this.length(), depth + 1, limit.message, child, null, null));
          return;
        }
        if (encoding === ENCODING_MASK) {
          this.#stack.push(frame(FRAME_MASK, this.length(), depth + 1, null, inst, limit, null));
          return;
        }
        this.value(encoding);
        continue;
      }
      const count = inst === null ? 0 : ++inst.counts[limit.index]!;
      if (encoding === ENCODING_MESSAGE) {
        // A list element, counted on its own while the list is within its limit.
        const element = inst !== null && count <= limit.max ? instance(limit.message!, `${fieldPath(inst.path, limit)}[${count - 1}]`) : null;
        this.#stack.push(frame(FRAME_MESSAGE, this.length(), depth + 1, limit.message, element, null, element));
        return;
      }
      if (encoding === ENCODING_MAP_ENTRY) {
        // Entries past the limit are no longer looked into.
        const within = inst !== null && count <= limit.max;
        const value = within && limit.message !== null ? instance(limit.message, `${fieldPath(inst.path, limit)}[${count - 1}]`) : null;
        this.#stack.push(frame(FRAME_MAP_ENTRY, this.length(), depth, limit.message, within ? inst : null, limit, value));
        return;
      }
      if (limit.packable && (tag & 7) === WIRE_DELIMITED) {
        if (inst !== null) inst.counts[limit.index]!--;
        this.#stack.push(frame(FRAME_PACKED, this.length(), depth, null, inst, limit, null));
        return;
      }
      this.value(encoding);
    }
  }

  // The elements of a packed record, read one by one as protobuf-es does (the last may end past the record).
  #packed(top: Frame, until: number): void {
    const limit = top.limit!;
    const encoding = limit.encoding;
    const counts = top.inst === null ? null : top.inst.counts;
    while (this.pos < top.end && this.pos < until) {
      this.value(encoding);
      if (counts !== null) counts[limit.index]!++;
    }
  }

  // One record of a google.protobuf.FieldMask: its field 1 (paths) is a repeated string.
  #maskPath(top: Frame): void {
    const tag = this.tag();
    const no = tag >>> 3;
    if (no === 1) {
      if (top.inst !== null) top.inst.counts[top.limit!.index]!++;
      this.bytes();
    } else {
      this.skip(tag & 7, no, MAX_MESSAGE_DEPTH - top.depth);
      this.tally.extra++;
    }
  }

  // One record of a map entry: the key (field 1) or the value (field 2), each possibly more than once.
  #mapEntryField(top: Frame): void {
    const field = top.limit!.field;
    if (field.fieldKind !== "map") throw STOP;
    const tag = this.tag();
    const no = tag >>> 3;
    if (no === 1) {
      top.keys++;
      this.value(scalarEncoding(field.mapKey));
    } else if (no === 2) {
      top.values++;
      if (field.mapKind === "message") this.#stack.push(frame(FRAME_MESSAGE, this.length(), top.depth + 1, top.limits, top.report, null, null));
      else if (field.mapKind === "enum") this.varint();
      else this.value(scalarEncoding(field.scalar));
    } else {
      this.skip(tag & 7, no, MAX_MESSAGE_DEPTH - top.depth);
      if (top.inst !== null) this.tally.extra++;
    }
  }

  // The end of a length-delimited value that starts here: its length, read, plus where it starts.
  private length(): number {
    const length = this.uint32();
    return this.pos + length;
  }

  // One value of a scalar encoding, as BinaryReader reads it.
  private value(encoding: number): void {
    if (encoding === ENCODING_BYTES) this.bytes();
    else if (encoding === ENCODING_VARINT) this.varint();
    else if (encoding === ENCODING_FIXED32) this.advance(4);
    else if (encoding === ENCODING_FIXED64) this.advance(8);
    else throw STOP;
  }

  // BinaryReader.tag(): a varint of at most 5 bytes, field number above 0, wire type 0 to 5.
  private tag(): number {
    const start = this.pos;
    const tag = this.uint32();
    const read = this.pos - start;
    if (read > 5 || (read === 5 && this.buf[this.pos - 1]! > 0x0f)) throw STOP;
    const no = tag >>> 3;
    const wire = tag & 7;
    if (no <= 0 || wire > 5) throw STOP;
    return tag;
  }

  // varint32read: up to 10 bytes, of which the low 32 bits count. A read past the end gives undefined, whose bits
  // read as 0 as they do in protobuf-es; the bounds check after it fails.
  private uint32(): number {
    const buf = this.buf;
    let b = buf[this.pos++]!;
    if ((b & 0x80) === 0) return this.bounded(b);
    let result = b & 0x7f;
    b = buf[this.pos++]!;
    result |= (b & 0x7f) << 7;
    if ((b & 0x80) === 0) return this.bounded(result);
    b = buf[this.pos++]!;
    result |= (b & 0x7f) << 14;
    if ((b & 0x80) === 0) return this.bounded(result);
    b = buf[this.pos++]!;
    result |= (b & 0x7f) << 21;
    if ((b & 0x80) === 0) return this.bounded(result);
    b = buf[this.pos++]!;
    result |= (b & 0x0f) << 28;
    for (let read = 5; (b & 0x80) !== 0 && read < 10; read++) b = buf[this.pos++]!;
    if ((b & 0x80) !== 0) throw STOP;
    return this.bounded(result >>> 0);
  }

  // A varint of an integer field (varint32read, varint64read, bool): at most 10 bytes.
  private varint(): void {
    const buf = this.buf;
    for (let read = 0; read < 10; read++) {
      if (((buf[this.pos++]!) & 0x80) === 0) {
        this.bounded(0);
        return;
      }
    }
    throw STOP;
  }

  private bytes(): void {
    const length = this.uint32();
    this.advance(length);
  }

  private advance(n: number): void {
    this.pos += n;
    this.bounded(0);
  }

  // BinaryReader.assertBounds().
  private bounded(value: number): number {
    if (this.pos > this.buf.length) throw STOP;
    return value;
  }

  // BinaryReader.skip(): an unknown field by its wire type; groups nest up to the recursion budget left.
  private skip(wire: number, no: number, budget: number): void {
    switch (wire) {
      case WIRE_VARINT: {
        const buf = this.buf;
        while (((buf[this.pos++]!) & 0x80) !== 0);
        this.bounded(0);
        return;
      }
      case WIRE_BIT64:
        this.advance(8);
        return;
      case WIRE_BIT32:
        this.advance(4);
        return;
      case WIRE_DELIMITED:
        this.bytes();
        return;
      case WIRE_START_GROUP: {
        if (budget <= 0) throw STOP;
        for (;;) {
          const innerTag = this.tag();
          const inner = innerTag >>> 3;
          const innerWire = innerTag & 7;
          if (innerWire === WIRE_END_GROUP) {
            if (inner !== no) throw STOP;
            break;
          }
          this.skip(innerWire, inner, budget - 1);
        }
        this.bounded(0);
        return;
      }
      default:
        throw STOP;
    }
  }
}
