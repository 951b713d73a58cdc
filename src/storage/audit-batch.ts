import type { AuditFilter, AuditRecord } from "../identity/identity-model.js";

// The audit trail is stored a batch to a row: the records of one flush of the trail (src/identity/audit-trail.ts,
// the audited calls of one turn of the event loop, MAX_BATCH at most) as one JSON array of arrays, with the earliest
// and latest time of its records beside it for queries by time. Every KMS call appends a record, so appending is what
// must cost little: a row with two indexes per record cost about 10 µs of CPU per record on the embedded store, 5%
// of a 1 KiB Encrypt, and one row per batch about 4 µs (bench/README.md). Reading is the rare operator query, which
// decodes the batches of its time range and filters their records (`selectRecords`). Both stores use this module.

export interface AuditBatchRow {
  first_at: number;
  last_at: number;
  // JSON: {"at": t0, "strings": [...], "rows": [[at - t0, principal, method, protocol, scope, resource, code,
  // requestId], ...]}, in the order of the calls, with principal, method, protocol, scope and resource as indexes into
  // `strings`. The records of a batch repeat these (one principal's calls of one method on one key): written once
  // each, a record takes about 60 bytes instead of 180, and appending it about a third less CPU (bench/README.md).
  // Batches stored before this form are a plain array of records, [[at, principal, ...], ...], read as they are.
  records: string;
}

type Encoded = [number, string, string, string, string, string, number, string];
type Indexed = [number, number, number, number, number, number, number, string];

interface EncodedBatch {
  at: number;
  strings: string[];
  rows: Indexed[];
}

export function encodeBatch(records: readonly AuditRecord[]): AuditBatchRow {
  let first = Infinity;
  let last = -Infinity;
  for (const r of records) {
    // The clock may step back between two calls of one batch; the batch spans both.
    if (r.at < first) first = r.at;
    if (r.at > last) last = r.at;
  }
  const base = records.length > 0 ? records[0]!.at : 0;
  const strings: string[] = [];
  const indexes = new Map<string, number>();
  const indexOf = (text: string): number => {
    let index = indexes.get(text);
    if (index === undefined) {
      index = strings.push(text) - 1;
      indexes.set(text, index);
    }
    return index;
  };
  const rows: Indexed[] = [];
  for (const r of records) {
    rows.push([r.at - base, indexOf(r.principal), indexOf(r.method), indexOf(r.protocol), indexOf(r.scope), indexOf(r.resource), r.code, r.requestId]);
  }
  const batch: EncodedBatch = { at: base, strings, rows };
  return { first_at: first, last_at: last, records: JSON.stringify(batch) };
}

export function decodeBatch(text: string): AuditRecord[] {
  if (text.startsWith("[")) {
    return (JSON.parse(text) as Encoded[]).map(([at, principal, method, protocol, scope, resource, code, requestId]) => ({
      at,
      principal,
      method,
      protocol,
      scope,
      resource,
      code,
      requestId,
    }));
  }
  const { at: base, strings, rows } = JSON.parse(text) as EncodedBatch;
  const string = (index: number): string => {
    const found = strings[index];
    if (found === undefined) throw new Error(`an audit batch names string ${index} of ${strings.length}`);
    return found;
  };
  return rows.map(([at, principal, method, protocol, scope, resource, code, requestId]) => ({
    at: base + at,
    principal: string(principal),
    method: string(method),
    protocol: string(protocol),
    scope: string(scope),
    resource: string(resource),
    code,
    requestId,
  }));
}

// Whether the batch may hold records of the filter's time range (the stores ask their database the same).
export function batchInRange(row: Pick<AuditBatchRow, "first_at" | "last_at">, filter: AuditFilter): boolean {
  if (filter.since !== undefined && row.last_at < filter.since) return false;
  if (filter.until !== undefined && row.first_at >= filter.until) return false;
  return true;
}

export function recordMatches(r: AuditRecord, filter: AuditFilter): boolean {
  if (filter.since !== undefined && r.at < filter.since) return false;
  if (filter.until !== undefined && r.at >= filter.until) return false;
  if (filter.principal !== undefined && r.principal !== filter.principal) return false;
  if (filter.resource !== undefined) {
    // A scope, or a resource path and everything under it: its sub-resources ("/v1/keys/k1/versions/2") and its
    // custom methods ("/cluster/v1/vdc-a/tasks/t1:wait"). A caller's id can make neither a "/" nor a ":" since its
    // values are percent-encoded (src/pipeline/request-fields.ts); records stored before that hold them as sent.
    const f = filter.resource;
    if (r.scope !== f && r.resource !== f && !r.resource.startsWith(`${f}/`) && !r.resource.startsWith(`${f}:`)) return false;
  }
  return true;
}

// The records of the batches (oldest first) that match the filter, oldest first, at most `filter.limit`.
export function selectRecords(batches: Iterable<Pick<AuditBatchRow, "records">>, filter: AuditFilter): AuditRecord[] {
  const out: AuditRecord[] = [];
  if (filter.limit <= 0) return out;
  for (const batch of batches) {
    for (const r of decodeBatch(batch.records)) {
      if (!recordMatches(r, filter)) continue;
      out.push(r);
      if (out.length >= filter.limit) return out;
    }
  }
  return out;
}

// The matching records of batches read in the order of their earliest time (first_at), given back oldest first, for
// a store that several servers append to at once (PostgreSQL): there the order batches were stored in is not the
// order of their times, and a query in that order listed records out of order, so that paging by the time of the
// last record shown (as the operator command's hint says) skipped records (a probe, 2026-11-27). A record is
// given back once no batch still to be read can hold an older one: once it is older than the earliest time of the
// last batch read. Records of one millisecond keep the order they were read in.
export class OldestFirst {
  private pending: AuditRecord[] = [];
  readonly records: AuditRecord[] = [];

  constructor(private readonly filter: AuditFilter) {}

  get full(): boolean {
    return this.records.length >= this.filter.limit;
  }

  // The batches read next, and the earliest time any batch after them can hold (undefined after the last batch).
  add(batches: Iterable<Pick<AuditBatchRow, "records">>, nextFrom: number | undefined): void {
    for (const batch of batches) for (const r of decodeBatch(batch.records)) if (recordMatches(r, this.filter)) this.pending.push(r);
    // Stable: records of one millisecond stay in the order they were read.
    this.pending.sort((a, b) => a.at - b.at);
    const ready = nextFrom === undefined ? this.pending.length : this.pending.findIndex((r) => r.at >= nextFrom);
    const take = Math.min(ready < 0 ? this.pending.length : ready, this.filter.limit - this.records.length);
    // A loop, not push(...): a page can give back more records than a call takes arguments.
    for (let i = 0; i < take; i++) this.records.push(this.pending[i]!);
    this.pending = this.pending.slice(take);
  }
}
