import type { ViolationList } from "../../errors/violation-list.js";
import { ENCODING_MAP_ENTRY, ENCODING_MESSAGE, MAX_EXTRA_VALUES, MAX_FIELD_NAME_CHARS } from "../../pipeline/message-limits.js";
import type { FieldLimit, MessageLimits } from "../../pipeline/message-limits.js";
import { Tally, fieldPath, instance } from "./tally.js";
import type { Instance } from "./tally.js";

// Counts the elements of every repeated and map field of a JSON request, and the values beyond its type's fields,
// on the bytes, before JSON.parse: the shape of a 4 MB body decides what parsing it costs (2 million nested arrays
// took JSON.parse 0.3-0.45 s, 350,000 object members 0.15 s, 460,000 strings 25 ms), and only the count can
// refuse it before that. One pass over the bytes, led by the descriptors: the objects of messages are read member
// by member (a member is its field, or unknown); every other object or array (the elements of a list, the entries
// of a map, whatever the type has no place for) is passed over by a tight loop that counts its elements and what
// they hold, about 1 ms a megabyte. An unknown member, a field given twice and an array or object where a string
// goes count, with all they hold, as values beyond the type's fields; past 1,000 of those the request is refused
// whatever follows, and the rest is only counted, roughly (opening brackets and commas). Where the text stops
// being JSON the count stops, and JSON.parse then refuses the body after at most the work the count saw.

// A member the message type does not have, for the callers that refuse those (REST does, at the first one;
// Connect ignores them).
export class UnknownJsonField {
  constructor(
    // JSON path of the member: the message's path and the member's name.
    readonly path: string,
    readonly name: string,
    readonly typeName: string,
  ) {}
}

export interface JsonCountOptions {
  unknownFields: "refuse" | "count";
  // The body is the value of this field of the request (REST's `body: "field"`), not the request itself.
  field?: FieldLimit;
}

// An object of a message, or an array of a list of messages, or an object of a map of messages, within its limit:
// read member by member or element by element.
const FRAME_MESSAGE = 0;
const FRAME_LIST = 1;
const FRAME_MAP = 2;

interface Frame {
  readonly kind: number;
  // FRAME_MESSAGE: the message; FRAME_LIST, FRAME_MAP: the message holding the field.
  readonly inst: Instance;
  // FRAME_LIST, FRAME_MAP: the field.
  readonly limit: FieldLimit | null;
  // FRAME_MESSAGE of a list element or map value: reported when it closes (a singular one with the request).
  readonly reportOnClose: boolean;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

function isHexDigit(c: number | undefined): boolean {
  return c !== undefined && ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66));
}

function isWhitespace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

// The closing quote of a string whose text starts at `from`: the first quote not escaped by an odd run of
// backslashes, found by the native indexOf (a string of 1 KiB took the byte loop a third of the count); -1 if none.
function closingQuote(buf: Uint8Array, from: number): number {
  for (let at = from; ; ) {
    const quote = buf.indexOf(QUOTE, at);
    if (quote < 0) return -1;
    let backslashes = 0;
    while (quote - backslashes - 1 >= from && buf[quote - backslashes - 1] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote;
    at = quote + 1;
  }
}

// Where the bytes stop being JSON: the count so far is the verdict.
const STOP = Symbol("json count: not JSON");

// A member name of more bytes than this is no field's name: each UTF-16 unit of a JSON string's text takes at most
// six bytes of it (\uXXXX), and no field name is longer than MAX_FIELD_NAME_CHARS (message-limits.ts). Such a name
// is checked to be JSON and only its start is read, for the refusal that quotes it: a refusal quotes at most 128
// characters of a name (src/errors/caller-text.ts), and reading a name of 3 MB whole held the event loop for about
// 90 ms (test/hostile/validation-floods.test.ts).
const LONG_NAME_BYTES = 6 * MAX_FIELD_NAME_CHARS + 2;
// Longer than any field name, so that the start read is no field's name either.
const LONG_NAME_READ_UNITS = MAX_FIELD_NAME_CHARS + 1;

const utf8 = new TextDecoder();

// What the next value is to the count. Set before each value is read.
const EXPECT_MESSAGE = 0; // a message: expectInst, reported when it closes if expectReport
const EXPECT_FIELD = 1; // the value of expectField in expectInst
const EXPECT_EXTRA = 2; // a value the type has no place for: it counts, with all it holds

// Null when the body is within the limits of its type, an UnknownJsonField for the first unknown member when
// `unknownFields` is "refuse", else the violations to refuse it with. Never throws.
export function countJson(limits: MessageLimits, bytes: Uint8Array, options: JsonCountOptions): ViolationList | UnknownJsonField | null {
  const walk = new JsonWalk(bytes, options.unknownFields === "refuse");
  const root = instance(limits, "");
  try {
    const unknown = walk.run(root, options.field);
    if (unknown !== null) return unknown;
  } catch (thrown) {
    if (thrown !== STOP) throw thrown;
  }
  walk.tally.report(root);
  return walk.tally.verdict();
}

class JsonWalk {
  pos = 0;
  readonly tally = new Tally();
  readonly stack: Frame[] = [];
  expect = EXPECT_MESSAGE;
  expectInst: Instance | null = null;
  expectField: FieldLimit | null = null;
  expectReport = false;
  // Results of passOver(): the elements or members of the container, and the values nested in them.
  passedElements = 0;
  passedNested = 0;

  constructor(
    private readonly buf: Uint8Array,
    private readonly refuseUnknown: boolean,
  ) {}

  run(root: Instance, field: FieldLimit | undefined): UnknownJsonField | null {
    if (field === undefined) this.expectMessage(root, false);
    else this.expectFieldOf(field, root);
    const buf = this.buf;
    for (;;) {
      this.whitespace();
      if (this.value()) {
        // A message object, or a list or map of messages, was opened: its first member or element, or its end.
        const top = this.stack[this.stack.length - 1]!;
        this.whitespace();
        if (buf[this.pos] === (top.kind === FRAME_LIST ? CLOSE_ARRAY : CLOSE_OBJECT)) {
          this.pos++;
          this.close();
        } else {
          const unknown = this.next(top);
          if (unknown !== null) return unknown;
          if (this.tally.extra > MAX_EXTRA_VALUES) return this.finish();
          if (this.stack[this.stack.length - 1] === top) continue;
        }
      }
      if (this.tally.extra > MAX_EXTRA_VALUES) return this.finish();
      // After a value: the next member or element of the innermost open object or array, or its end.
      for (;;) {
        const top = this.stack[this.stack.length - 1];
        if (top === undefined) return null;
        this.whitespace();
        const c = buf[this.pos++];
        if (c === COMMA) {
          const unknown = this.next(top);
          if (unknown !== null) return unknown;
          if (this.tally.extra > MAX_EXTRA_VALUES) return this.finish();
          // A list or map over its limit was passed over to its end.
          if (this.stack[this.stack.length - 1] !== top) continue;
          break;
        }
        if (c !== (top.kind === FRAME_LIST ? CLOSE_ARRAY : CLOSE_OBJECT)) throw STOP;
        this.close();
      }
    }
  }

  // The next member or element of `top`: sets what its value is, or passes over the rest of a list or map that
  // is over its limit (and closes it).
  private next(top: Frame): UnknownJsonField | null {
    if (top.kind === FRAME_MESSAGE) return this.member(top.inst);
    const limit = top.limit!;
    const inst = top.inst;
    if (top.kind === FRAME_MAP) {
      this.whitespace();
      const start = this.pos;
      if (this.buf[start] !== QUOTE) throw STOP;
      const end = this.string();
      this.colon();
      const count = ++inst.counts[limit.index]!;
      if (count <= limit.max) {
        this.expectMessage(instance(limit.message!, `${fieldPath(inst.path, limit)}[${JSON.stringify(this.text(start, end))}]`), true);
        return null;
      }
      // The entry over the limit: the rest of the object is only counted.
      this.pos = start;
    } else {
      const count = ++inst.counts[limit.index]!;
      if (count <= limit.max) {
        this.expectMessage(instance(limit.message!, `${fieldPath(inst.path, limit)}[${count - 1}]`), true);
        return null;
      }
    }
    // This element or entry and the ones after it.
    this.passOver(1);
    inst.counts[limit.index]! += this.passedElements - 1;
    this.stack.pop();
    return null;
  }

  // A member of a message object: its key and colon; sets what its value is.
  private member(inst: Instance): UnknownJsonField | null {
    this.whitespace();
    const start = this.pos;
    if (this.buf[start] !== QUOTE) throw STOP;
    const end = this.string();
    this.colon();
    const name = end - start > LONG_NAME_BYTES ? this.longText(start, end) : this.text(start, end);
    const limit = inst.limits.byName.get(name);
    if (limit === undefined) {
      if (this.refuseUnknown) return new UnknownJsonField(inst.path === "" ? name : `${inst.path}.${name}`, name, inst.limits.desc.typeName);
      this.expect = EXPECT_EXTRA;
      return null;
    }
    // A field given twice, or by both its names: JSON.parse keeps one of them.
    if (inst.seen[limit.index] === 1) this.tally.extra++;
    else inst.seen[limit.index] = 1;
    this.expectFieldOf(limit, inst);
    return null;
  }

  private expectMessage(inst: Instance, report: boolean): void {
    this.expect = EXPECT_MESSAGE;
    this.expectInst = inst;
    this.expectReport = report;
  }

  private expectFieldOf(limit: FieldLimit, inst: Instance): void {
    this.expect = EXPECT_FIELD;
    this.expectField = limit;
    this.expectInst = inst;
  }

  // Reads one value as the count expects it. Returns true when it opened a frame (pushed on the stack).
  private value(): boolean {
    const buf = this.buf;
    const c = buf[this.pos];
    const expect = this.expect;
    if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      const object = c === OPEN_OBJECT;
      if (expect === EXPECT_MESSAGE) {
        if (object) return this.open(FRAME_MESSAGE, this.expectInst!, null, this.expectReport);
      } else if (expect === EXPECT_FIELD) {
        const limit = this.expectField!;
        const inst = this.expectInst!;
        const ofMessages = limit.message !== null && !limit.jsonOpaque;
        if (limit.list) {
          if (!object) {
            if (ofMessages) return this.open(FRAME_LIST, inst, limit, false);
            this.passOver(0);
            inst.counts[limit.index]! += this.passedElements;
            // Arrays or objects as elements of a list of strings or numbers.
            this.tally.extra += this.passedNested;
            return false;
          }
        } else if (limit.encoding === ENCODING_MAP_ENTRY) {
          if (object) {
            if (ofMessages) return this.open(FRAME_MAP, inst, limit, false);
            this.passOver(0);
            inst.counts[limit.index]! += this.passedElements;
            this.tally.extra += this.passedNested;
            return false;
          }
        } else if (limit.encoding === ENCODING_MESSAGE && !limit.jsonOpaque && object) {
          return this.open(FRAME_MESSAGE, (inst.children[limit.index] ??= instance(limit.message!, fieldPath(inst.path, limit))), null, false);
        }
      }
      // An object or array where the type has none: it counts, with all it holds.
      this.passOver(0);
      this.tally.extra += 1 + this.passedElements + this.passedNested;
      return false;
    }
    if (expect === EXPECT_EXTRA) this.tally.extra++;
    if (c === QUOTE) {
      const start = this.pos;
      const end = this.string();
      if (expect === EXPECT_FIELD && this.expectField!.mask) {
        const limit = this.expectField!;
        this.expectInst!.counts[limit.index]! += this.maskPaths(start, end);
      }
      return false;
    }
    this.literal();
    return false;
  }

  private open(kind: number, inst: Instance, limit: FieldLimit | null, reportOnClose: boolean): true {
    this.pos++;
    this.stack.push({ kind, inst, limit, reportOnClose });
    return true;
  }

  // The innermost object or array ends.
  private close(): void {
    const top = this.stack.pop()!;
    if (top.reportOnClose) this.tally.report(top.inst);
  }

  // Passes over an object or array, from its opening bracket (depth 0) or from within it after a comma (depth 1),
  // to past its closing one: passedElements its members or elements (from here), passedNested the values within
  // them (opening brackets and commas: at most one short per object or array).
  private passOver(depth: number): void {
    const buf = this.buf;
    const length = buf.length;
    let pos = this.pos;
    let elements = 0;
    let nested = 0;
    let empty = depth === 0;
    for (;;) {
      if (pos >= length) {
        this.pos = pos;
        throw STOP;
      }
      const c = buf[pos++]!;
      if (c === QUOTE) {
        const end = closingQuote(buf, pos);
        if (end < 0) {
          this.pos = length;
          throw STOP;
        }
        pos = end + 1;
        if (depth === 1) empty = false;
      } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
        depth++;
        if (depth > 1) {
          nested++;
          if (depth === 2) empty = false;
        }
      } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
        depth--;
        if (depth === 0) break;
      } else if (c === COMMA) {
        if (depth === 1) elements++;
        else nested++;
      } else if (depth === 1 && !isWhitespace(c)) empty = false;
    }
    this.pos = pos;
    this.passedElements = empty ? 0 : elements + 1;
    this.passedNested = nested;
  }

  // Past 1,000 values beyond the type's fields the request is refused whatever follows: the rest is counted as
  // passOver counts, without looking at what it is.
  private finish(): null {
    const buf = this.buf;
    const length = buf.length;
    let extra = 0;
    for (let pos = this.pos; pos < length; pos++) {
      const c = buf[pos];
      if (c === QUOTE) {
        const end = closingQuote(buf, pos + 1);
        pos = end < 0 ? length : end;
      } else if (c === COMMA || c === OPEN_OBJECT || c === OPEN_ARRAY) extra++;
    }
    this.tally.extra += extra;
    this.stack.length = 0;
    return null;
  }

  private colon(): void {
    this.whitespace();
    if (this.buf[this.pos++] !== COLON) throw STOP;
    this.whitespace();
  }

  // From an opening quote to past the closing one; returns the position after the closing quote.
  private string(): number {
    const end = closingQuote(this.buf, this.pos + 1);
    if (end < 0) throw STOP;
    this.pos = end + 1;
    return this.pos;
  }

  // A number, true, false or null: up to the next delimiter. What it is exactly is JSON.parse's to judge.
  private literal(): void {
    const buf = this.buf;
    const start = this.pos;
    let pos = start;
    for (;;) {
      const c = buf[pos];
      if (c === undefined || c === COMMA || c === CLOSE_OBJECT || c === CLOSE_ARRAY || isWhitespace(c)) break;
      pos++;
    }
    if (pos === start) throw STOP;
    this.pos = pos;
  }

  private whitespace(): void {
    const buf = this.buf;
    while (isWhitespace(buf[this.pos])) this.pos++;
  }

  // The text of a string from its opening quote to past its closing one.
  private text(start: number, end: number): string {
    const buf = this.buf;
    let plain = end - start < 64;
    for (let i = start + 1; plain && i < end - 1; i++) if (buf[i]! >= 0x80 || buf[i] === BACKSLASH) plain = false;
    // apply, not a spread: spreading a typed array goes through its iterator, several times slower.
    if (plain) return String.fromCharCode.apply(null, buf.subarray(start + 1, end - 1) as unknown as number[]);
    try {
      return JSON.parse(utf8.decode(buf.subarray(start, end))) as string;
    } catch {
      throw STOP;
    }
  }

  // The first LONG_NAME_READ_UNITS UTF-16 units of a long string (a few more where a character ends), once all of it
  // is known to be what JSON.parse accepts in a string: no raw control character and no malformed escape, so that
  // the count stops where reading all of it stopped. Byte by byte, as a cut must fall between two characters: not
  // inside an escape, nor inside a character's UTF-8 bytes (continuation bytes, 0x80-0xbf, count as no unit).
  private longText(start: number, end: number): string {
    const buf = this.buf;
    let cut = -1;
    let units = 0;
    for (let i = start + 1; i < end - 1; ) {
      const c = buf[i]!;
      if (cut < 0 && units >= LONG_NAME_READ_UNITS && (c < 0x80 || c >= 0xc0)) cut = i;
      if (c < 0x20) throw STOP;
      if (c === BACKSLASH) {
        i += this.escapeLength(i);
        units++;
      } else {
        i++;
        if (c < 0x80 || c >= 0xc0) units += c >= 0xf0 ? 2 : 1;
      }
    }
    if (cut < 0) return this.text(start, end);
    try {
      return JSON.parse(`${utf8.decode(buf.subarray(start, cut))}"`) as string;
    } catch {
      throw STOP;
    }
  }

  // The bytes of the escape sequence at `at` (a backslash): 6 for \uXXXX, 2 for the others; throws STOP for one
  // JSON does not have.
  private escapeLength(at: number): number {
    const buf = this.buf;
    const e = buf[at + 1];
    if (e === 0x75) {
      for (let h = at + 2; h < at + 6; h++) if (!isHexDigit(buf[h])) throw STOP;
      return 6;
    }
    // " \ / b f n r t
    if (e === QUOTE || e === BACKSLASH || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) return 2;
    throw STOP;
  }

  // A FieldMask's JSON form: its paths separated by commas; none in "".
  private maskPaths(start: number, end: number): number {
    const buf = this.buf;
    if (end - start === 2) return 0;
    if (!buf.subarray(start, end).includes(BACKSLASH)) {
      let paths = 1;
      for (let i = start + 1; i < end - 1; i++) if (buf[i] === COMMA) paths++;
      return paths;
    }
    const text = this.text(start, end);
    return text === "" ? 0 : text.split(",").length;
  }
}
