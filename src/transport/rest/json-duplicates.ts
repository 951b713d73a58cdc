// The first member name that one object of a JSON text has twice, or undefined. JSON.parse keeps the last of such
// members without a word, so {"keyId":"a","keyId":"b"} was read as key b over REST, where protobuf-es's
// fromJsonString, and so Connect's JSON, refuses it: a proxy or a check that reads the first would see another
// request than the one served. The same walk as protobuf-es's checkDuplicateKeys, with the same decoding of escaped
// names, but each string is skipped with indexOf rather than a character at a time: the plaintext of an Encrypt is
// one long string. Only for a text JSON.parse has accepted, so it may take the text to be well formed.
export function duplicateMemberOf(text: string): string | undefined {
  // The names seen in each open object; null for an array.
  const open: (Set<string> | null)[] = [];
  // Whether the next string is a member name.
  let expectName = false;
  let i = 0;
  while (i < text.length) {
    switch (text.charCodeAt(i)) {
      case 0x7b: // {
        open.push(new Set());
        expectName = true;
        break;
      case 0x5b: // [
        open.push(null);
        expectName = false;
        break;
      case 0x7d: // }
      case 0x5d: // ]
        open.pop();
        expectName = false;
        break;
      case 0x2c: // ,
        expectName = open[open.length - 1] != null;
        break;
      case 0x3a: // :
        expectName = false;
        break;
      case 0x22: {
        // "
        const close = closingQuote(text, i);
        const names = open[open.length - 1];
        if (expectName && names != null) {
          const raw = text.slice(i + 1, close);
          const name = raw.includes("\\") ? (JSON.parse(text.slice(i, close + 1)) as string) : raw;
          if (names.has(name)) return name;
          names.add(name);
        }
        expectName = false;
        i = close;
        break;
      }
    }
    i++;
  }
  return undefined;
}

// The index of the quote that ends the string opening at `start`: the next one not escaped by an odd number of
// backslashes.
function closingQuote(text: string, start: number): number {
  let quote = text.indexOf('"', start + 1);
  for (;;) {
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return quote;
    quote = text.indexOf('"', quote + 1);
  }
}
