// RFC 3339 date-times (5.6), as a Timestamp's JSON and the operator's --since, --until and --before take them.
const SHAPE = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

// Whether the text has the shape of an RFC 3339 date-time but names no moment: a month, day, hour, minute or second
// (leap seconds included, which a Timestamp does not have) or an offset out of its range.
export function isImpossibleTimestamp(text: string): boolean {
  const m = SHAPE.exec(text);
  if (m === null) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const offsetHours = m[7] === undefined ? 0 : Number(m[7]);
  const offsetMinutes = m[8] === undefined ? 0 : Number(m[8]);
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return true;
  return hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59;
}

// The moment an RFC 3339 date-time names, in epoch milliseconds; null for any other text. Date.parse alone took
// "12" as 2001-12-01, "Nov 28 2026" and "2026-02-30T00:00:00Z" (as March 2), so an audit prune deleted days more than
// asked (a probe of the clock, 2026-11-28).
export function rfc3339Millis(text: string): number | null {
  if (!SHAPE.test(text) || isImpossibleTimestamp(text)) return null;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? null : ms;
}
