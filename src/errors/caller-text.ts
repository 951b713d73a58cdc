// Text a caller sent, repeated in an error message. Whatever was sent, the message stays small (a label of 4 MB
// must not make an answer of 4 MB) and carries no unprintable character raw: a NUL, an ANSI escape or a bidi
// override would reach logs and terminals as it is.

export const MAX_QUOTED_CHARS = 64;

// Unicode's "Other" categories: control, format (bidi overrides, zero width), lone surrogate, private use, unassigned;
// and the line and paragraph separators U+2028 and U+2029, which Python's splitlines, JavaScript's regular
// expressions and many editors take for line ends: raw, one showed a forged line in the audit output (a probe,
// 2026-11-28).
const UNPRINTABLE = /[\p{C}\p{Zl}\p{Zp}]/gu;

// \uXXXX per UTF-16 unit, as JSON.stringify writes control characters.
function escapeUnprintable(text: string): string {
  return text.replace(UNPRINTABLE, (char) => {
    let escaped = "";
    for (let i = 0; i < char.length; i++) escaped += `\\u${char.charCodeAt(i).toString(16).padStart(4, "0")}`;
    return escaped;
  });
}

// At most `max` UTF-16 units, then "..." where it was cut. A surrogate pair cut in two leaves a lone surrogate,
// which the escaping then writes as \uXXXX.
function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}

// A caller's value quoted for a description: `cannot update "abc"`. Cut to 64 characters, then written as a JSON
// string (quotes and backslashes escaped), with every unprintable character escaped.
export function quoted(value: string): string {
  return escapeUnprintable(JSON.stringify(cut(value, MAX_QUOTED_CHARS)));
}

// Any text for a message, cut to `max` characters before escaping, so that only the first `max` characters of a
// huge text are ever looked at. Text without unprintable characters comes back unchanged when it fits.
export function printable(text: string, max: number): string {
  return escapeUnprintable(cut(text, max));
}

// Lone surrogates (half of a character outside the BMP, as JSON.parse quotes the unit it stopped at, or a cut
// pair) as U+FFFD, what String.prototype.toWellFormed does (ES2024, not in our lib): text with one cannot be
// encoded as UTF-8, and encodeURIComponent, which Connect uses for grpc-message, throws URIError on it.
const LONE_SURROGATE = /\p{Cs}/gu;

export function wellFormed(text: string): string {
  return text.replace(LONE_SURROGATE, "\uFFFD");
}
