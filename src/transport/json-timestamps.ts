import type { DescField, DescMessage, JsonValue } from "@bufbuild/protobuf";

// protobuf-es reads a google.protobuf.Timestamp's RFC 3339 text with Date.parse, which rolls a date that does not
// exist over into one that does: "2027-02-30T00:00:00Z" was stored as March 2 and "2027-01-01T24:00:00Z" as the next
// day, the call answered OK (two probes, 2026-11-27), while month 13 was refused. RFC 3339 (5.7) bounds the day by
// its month and the hour by 23. These find such a text in a JSON request before it is decoded, for REST and for
// Connect's JSON forms alike; a text of any other shape is left to protobuf-es, which refuses or reads it as before.

const TIMESTAMP = "google.protobuf.Timestamp";
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

const holding = new WeakMap<DescMessage, boolean>();

// Whether a request of this type can hold a Timestamp at all, in a field, a list or a map, at any depth: most cannot,
// and are not walked.
export function holdsTimestamp(desc: DescMessage, visiting = new Set<DescMessage>()): boolean {
  const known = holding.get(desc);
  if (known !== undefined) return known;
  if (desc.typeName === TIMESTAMP) return true;
  if (visiting.has(desc)) return false;
  visiting.add(desc);
  const found = desc.fields.some((f) => f.message !== undefined && holdsTimestamp(f.message, visiting));
  visiting.delete(desc);
  holding.set(desc, found);
  return found;
}

// The field and JSON path of the first Timestamp text in `json` that names no moment, or undefined.
export function findImpossibleTimestamp(desc: DescMessage, json: JsonValue, path: string): { field: DescField; path: string } | undefined {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return undefined;
  for (const [key, value] of Object.entries(json)) {
    const field = desc.fields.find((f) => f.jsonName === key || f.name === key);
    const message = field?.message;
    if (field === undefined || message === undefined || !holdsTimestamp(message)) continue;
    const at = path === "" ? key : `${path}.${key}`;
    const found =
      field.fieldKind === "list" && Array.isArray(value)
        ? firstOf(value.map((item, i) => [item, `${at}[${i}]`] as const), field, message)
        : field.fieldKind === "map" && typeof value === "object" && value !== null && !Array.isArray(value)
          ? firstOf(Object.entries(value).map(([k, item]) => [item, `${at}[${JSON.stringify(k)}]`] as const), field, message)
          : firstOf([[value, at]], field, message);
    if (found !== undefined) return found;
  }
  return undefined;
}

function firstOf(items: readonly (readonly [JsonValue | undefined, string])[], field: DescField, message: DescMessage): { field: DescField; path: string } | undefined {
  for (const [item, at] of items) {
    if (item === undefined) continue;
    if (message.typeName === TIMESTAMP) {
      if (typeof item === "string" && isImpossibleTimestamp(item)) return { field, path: at };
      continue;
    }
    const found = findImpossibleTimestamp(message, item, at);
    if (found !== undefined) return found;
  }
  return undefined;
}
