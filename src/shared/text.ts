// Rules for the free text a caller stores (a key's or a vApp's description), the same on every surface and store.

// Unicode's control characters (general category Cc): C0, DEL and C1 (U+0080 to U+009F, NEL and CSI among them,
// which a terminal acts on as it does on their C0 forms).
export function isControl(code: number): boolean {
  return code < 0x20 || (code >= 0x7f && code <= 0x9f);
}

// Whether the text holds a control character other than tab and the line ends, which are text in a description.
// NUL among them is no text a PostgreSQL column can hold; an escape sequence would reach every terminal that shows it.
export function holdsControlBesidesLineBreaks(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code !== 0x09 && code !== 0x0a && code !== 0x0d && isControl(code)) return true;
  }
  return false;
}
