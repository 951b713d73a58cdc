import { XmlRefusal } from "./xml-refusal.js";

// The entity decoder given to fast-xml-parser (its `entityDecoder` option): it expands XML's five predefined
// entities and character references, and refuses everything else. The library's own decoder (@nodable/entities)
// leaves an undeclared entity in the text as it is (`a&foo;b` was stored as that text), drops a reference to a
// character XML 1.0 forbids (`&#1;`, `&#0;`, `&#xD800;` vanished from a name) and expands HTML's named entities
// (`&nbsp;`), and no option of it refuses instead; XML 1.0 makes each of them a fatal error (sections 2.2, 4.1 and
// 4.6). The parser calls `decode` on every text and attribute value it has checked the markup of; no DTD is ever
// read (the reader refuses one before parsing), so no document declares an entity of its own.

const PREDEFINED = new Map([
  ["lt", "<"],
  ["gt", ">"],
  ["amp", "&"],
  ["apos", "'"],
  ["quot", '"'],
]);

// XML 1.0's Char production (section 2.2): what a document, and so a character reference, may hold.
export function isXmlChar(cp: number): boolean {
  return cp === 0x9 || cp === 0xa || cp === 0xd || (cp >= 0x20 && cp <= 0xd7ff) || (cp >= 0xe000 && cp <= 0xfffd) || (cp >= 0x10000 && cp <= 0x10ffff);
}

// U+0001 as the messages write a code point.
export function codePointName(cp: number): string {
  return `U+${cp.toString(16).toUpperCase().padStart(4, "0")}`;
}

// The reference as the caller wrote it, cut short for a message.
function shown(ref: string): string {
  return ref.length > 40 ? `&${ref.slice(0, 40)}...` : `&${ref};`;
}

function isDigits(text: string, hex: boolean): boolean {
  if (text === "") return false;
  for (const c of text) {
    const digit = c >= "0" && c <= "9";
    if (!digit && !(hex && ((c >= "a" && c <= "f") || (c >= "A" && c <= "F")))) return false;
  }
  return true;
}

function resolve(ref: string): string {
  if (ref.startsWith("#")) {
    const hex = ref.startsWith("#x");
    const digits = ref.slice(hex ? 2 : 1);
    if (!isDigits(digits, hex)) throw new XmlRefusal(`${shown(ref)} is not a character reference: write &#<decimal digits>; or &#x<hex digits>;`);
    // However many digits: a number past U+10FFFF (or Infinity) is no character.
    const cp = Number.parseInt(digits, hex ? 16 : 10);
    if (!isXmlChar(cp)) {
      const which = Number.isFinite(cp) && cp <= 0x10ffff ? codePointName(cp) : "no Unicode character";
      throw new XmlRefusal(`the character reference ${shown(ref)} names ${which}, which XML 1.0 does not allow in a document`);
    }
    return String.fromCodePoint(cp);
  }
  const value = PREDEFINED.get(ref);
  if (value === undefined && [" ", "\t", "\n", "\r", "&", "<", "\"", "'"].some((c) => ref.includes(c))) {
    throw new XmlRefusal("an & begins no reference: write a literal & as &amp;");
  }
  if (value === undefined) {
    throw new XmlRefusal(`the entity ${shown(ref)} is not declared; only XML's predefined entities (&lt; &gt; &amp; &apos; &quot;) and character references are expanded`);
  }
  return value;
}

export const strictReferences = {
  decode(text: string): string {
    let amp = text.indexOf("&");
    if (amp < 0) return text;
    let out = "";
    let from = 0;
    while (amp >= 0) {
      const semi = text.indexOf(";", amp);
      if (semi < 0) throw new XmlRefusal("an & begins no reference: write a literal & as &amp;");
      out += text.slice(from, amp) + resolve(text.slice(amp + 1, semi));
      from = semi + 1;
      amp = text.indexOf("&", from);
    }
    return out + text.slice(from);
  },
  reset(): void {},
  setXmlVersion(): void {},
  setExternalEntities(): void {},
  // Entities a DOCTYPE declares; the reader refuses a DOCTYPE before the parser sees one.
  addInputEntities(): void {
    throw new XmlRefusal("the body declares entities, which this API does not accept");
  },
};
