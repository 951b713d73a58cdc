import type { Duration, FieldMask, Timestamp } from "@bufbuild/protobuf/wkt";
import { quoted } from "../errors/caller-text.js";
import { invalidArgument } from "../errors/domain-error.js";
import { ViolationList, tooManyItems } from "../errors/violation-list.js";
import { INVALID_DURATION, durationText, isValidDuration } from "../shared/duration.js";
import { PLAIN_ID } from "../shared/ids.js";
import { holdsControlBesidesLineBreaks } from "../shared/text.js";
import { maxItemsOf } from "../pipeline/message-limits.js";
import { CryptoKeySchema, CryptoKeyVersion_Algorithm, UpdateCryptoKeyRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import type { Page } from "../../gen/kms/v1/kms_pb.js";
import type { Algorithm } from "./model.js";
import type { KeyPage } from "../storage/kms-store.js";

// Field rules of CONTRACT section 5. Each check adds one violation naming the field by its JSON path, and the
// request fails with all of them at once, so a caller fixes everything in one round. A repeated field is checked
// for its number of elements first; only a field within that limit has its elements checked one by one, so the
// work for a refused request stays small however many elements it carries.

export const MAX_DATA_BYTES = 64 * 1024;
const MAX_ROTATION_MS = 100 * 365.25 * 24 * 3600 * 1000;
// Printable: no control, format, surrogate or unassigned characters.
const PRINTABLE = /^[^\p{C}]+$/u;
// Declared in proto/ as (cloudplane.api.v1.max_items), where the adapters count them before decoding a request;
// checked here again for requests that reach the service some other way.
const MAX_LABELS = maxItemsOf(CryptoKeySchema.field.labels);
const MAX_MASK_PATHS = maxItemsOf(UpdateCryptoKeyRequestSchema.field.updateMask);

export class Violations extends ViolationList {
  throwIfAny(): void {
    if (this.count > 0) throw invalidArgument("kms", this);
  }
}

// Whether text has more than `max` characters (code points, as people count them), looking at no more than
// 2 * max UTF-16 units of it: a caller's 4 MB string is not copied into an array to be counted.
function longerThan(text: string, max: number): boolean {
  if (text.length <= max) return false;
  if (text.length > 2 * max) return true;
  let chars = 0;
  for (let i = 0; i < text.length; i += (text.codePointAt(i) ?? 0) > 0xffff ? 2 : 1) chars++;
  return chars > max;
}

export function checkParentId(v: Violations, parentId: string): void {
  if (parentId === "") v.add("parentId", "is required");
  else if (!PLAIN_ID.test(parentId)) v.add("parentId", "must be 1 to 64 characters of letters, digits, '.', '_' and '-'");
}

export function checkKeyId(v: Violations, field: string, keyId: string): void {
  v.requiredId(field, keyId);
}

export function checkVersionId(v: Violations, versionId: number): void {
  // Proto3 has no "absent" for an int32: 0 is what a caller who left it out sends.
  if (versionId === 0) v.add("keyVersionId", "is required: a version number, 1 or more");
  else if (versionId < 1) v.add("keyVersionId", `must be at least 1, got ${versionId}`);
}

export function checkName(v: Violations, field: string, name: string): void {
  if (longerThan(name, 100)) v.add(field, "must be at most 100 characters");
  // As labels: a NUL or a bidi override in a name would reach every list, log and terminal that shows it.
  else if (name !== "" && !PRINTABLE.test(name)) v.add(field, "must contain printable characters only");
}

// Tab and line ends are text in a description; other control characters are refused, as in a vApp's (a NUL could
// be stored on SQLite and was INTERNAL on PostgreSQL, whose text cannot hold one).
export function checkDescription(v: Violations, field: string, description: string): void {
  if (longerThan(description, 1024)) v.add(field, "must be at most 1024 characters");
  else if (holdsControlBesidesLineBreaks(description)) v.add(field, "must not hold control characters other than tab and line ends");
}

export function checkLabels(v: Violations, field: string, labels: string[]): void {
  if (labels.length > MAX_LABELS) {
    v.add(field, tooManyItems(MAX_LABELS, labels.length, "labels"));
    return;
  }
  const seen = new Set<string>();
  labels.forEach((label, i) => {
    if (label === "" || longerThan(label, 128)) v.add(`${field}[${i}]`, "must be 1 to 128 characters");
    else if (!PRINTABLE.test(label)) v.add(`${field}[${i}]`, "must contain printable characters only");
    else if (seen.has(label)) v.add(`${field}[${i}]`, `duplicates label ${quoted(label)}`);
    seen.add(label);
  });
}

export function algorithmOf(v: Violations, field: string, value: CryptoKeyVersion_Algorithm): Algorithm | null {
  switch (value) {
    case CryptoKeyVersion_Algorithm.ALGORITHM_UNSPECIFIED:
      return null;
    case CryptoKeyVersion_Algorithm.AES_128:
      return "AES_128";
    case CryptoKeyVersion_Algorithm.AES_192:
      return "AES_192";
    case CryptoKeyVersion_Algorithm.AES_256:
      return "AES_256";
    default:
      v.add(field, "must be one of ALGORITHM_UNSPECIFIED, AES_128, AES_192, AES_256");
      return null;
  }
}

export function rotationPeriodOf(v: Violations, field: string, period: Duration | undefined, minMs: number): number | null {
  if (period === undefined) return null;
  if (!isValidDuration(period)) {
    v.add(field, INVALID_DURATION);
    return null;
  }
  const ms = Number(period.seconds) * 1000 + Math.trunc(period.nanos / 1e6);
  // Compared with the nanoseconds too: 3155760000.000000001s is over the maximum, though not by a whole millisecond.
  const overMax = ms > MAX_ROTATION_MS || (ms === MAX_ROTATION_MS && period.nanos > 0);
  if (ms < minMs || overMax) {
    v.add(field, `must be between ${minMs / 1000}s and ${MAX_ROTATION_MS / 1000}s (100 years), got ${durationText(period)}`);
    return null;
  }
  return ms;
}

// The range of google.protobuf.Timestamp: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z.
const MIN_TIMESTAMP_SECONDS = -62135596800n;
const MAX_TIMESTAMP_SECONDS = 253402300799n;

// Milliseconds since the epoch of a valid Timestamp, truncated (rounding took 9999-12-31T23:59:59.9995Z to the year
// 10000, which was stored and then failed every read of the key and of its namespace as JSON); null, with a
// violation, for a Timestamp outside its range or with nanos outside 0 to 999,999,999, which gRPC's binary form can
// carry (seconds: 1e17 failed the store's INTEGER column).
export function timestampMsOf(v: Violations, field: string, ts: Timestamp): number | null {
  if (ts.seconds < MIN_TIMESTAMP_SECONDS || ts.seconds > MAX_TIMESTAMP_SECONDS || ts.nanos < 0 || ts.nanos > 999_999_999) {
    v.add(field, "is not a valid Timestamp: it must lie between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999999Z, with nanos from 0 to 999999999");
    return null;
  }
  return Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1e6);
}

export function pageOf(v: Violations, page: Page | undefined): KeyPage {
  const limit = page?.limit ?? 0;
  const offset = page?.offset ?? 0;
  if (limit < 0 || limit > 1000) v.add("page.limit", `must be between 0 and 1000 (0 means 100), got ${limit}`);
  if (offset < 0) v.add("page.offset", `must be at least 0, got ${offset}`);
  return { limit: limit === 0 ? 100 : limit, offset };
}

export function checkData(v: Violations, field: string, data: Uint8Array, required: boolean): void {
  if (required && data.length === 0) v.add(field, "is required and must not be empty");
  if (data.length > MAX_DATA_BYTES) v.add(field, `must be at most ${MAX_DATA_BYTES} bytes, got ${data.length}`);
}

export const updatablePaths = [
  "name",
  "description",
  "labels",
  "rotation_period",
  "next_rotation_time",
  "default_algorithm",
] as const;
export type UpdatablePath = (typeof updatablePaths)[number];
const ALLOWED_PATHS = "name, description, labels, rotationPeriod, nextRotationTime, defaultAlgorithm";

// FieldMask paths arrive as proto names from binary callers (or lowerCamel, from some) and as proto names decoded from
// lowerCamel from JSON callers.
export function maskPathsOf(v: Violations, mask: FieldMask | undefined): Set<UpdatablePath> {
  const paths = new Set<UpdatablePath>();
  if (mask === undefined || mask.paths.length === 0) {
    v.add("updateMask", `is required and must name at least one field: ${ALLOWED_PATHS}`);
    return paths;
  }
  if (mask.paths.length > MAX_MASK_PATHS) {
    v.add("updateMask", tooManyItems(MAX_MASK_PATHS, mask.paths.length, "paths"));
    return paths;
  }
  for (const raw of mask.paths) {
    const path = raw.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    if ((updatablePaths as readonly string[]).includes(path)) paths.add(path as UpdatablePath);
    // Named in lowerCamel, as the allowed paths are and as a JSON caller wrote it: decoding a JSON mask turned
    // "createdAt" into "created_at", which the message quoted. A binary caller's "created_at" reads the same, so
    // that one mistake has one message on every protocol.
    else v.add("updateMask", `cannot update ${quoted(lowerCamel(path))}; allowed: ${ALLOWED_PATHS}`);
  }
  return paths;
}

// A mask path's JSON form: "created_at" is "createdAt".
function lowerCamel(path: string): string {
  return path.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}
