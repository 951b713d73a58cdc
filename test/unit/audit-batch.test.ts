import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import type { AuditRecord } from "../../src/identity/identity-model.js";
import { batchInRange, decodeBatch, encodeBatch, selectRecords } from "../../src/storage/audit-batch.js";
import { SCHEMA_VERSIONS, migrate } from "../../src/storage/sqlite/migrations.js";
import { SqliteAuditStore } from "../../src/storage/sqlite/sqlite-audit-store.js";

function record(at: number, principal: string, resource: string, code = 0): AuditRecord {
  return { at, principal, method: "kms.v1.KeyManagerService/Encrypt", protocol: "grpc", scope: "kms-namespace:team-a", resource, code, requestId: `req-${at}` };
}

describe("the audit trail stored a batch to a row", () => {
  it("gives back every record of a batch as it was, in order, with the batch's time span", () => {
    const records = [record(20, "p-1", "/v1/keys/a"), record(10, "p-2", "/v1/keys/b\u2028\"", 7), record(30, "p-1", "")];
    const row = encodeBatch(records);
    expect(row).toMatchObject({ first_at: 10, last_at: 30 });
    expect(decodeBatch(row.records)).toEqual(records);
  });

  it("writes each repeated text of a batch once, and still reads batches stored as a plain array of records", () => {
    const records = Array.from({ length: 100 }, (_, i) => record(1_764_000_000_000 + i, "p-1", "/v1/keys/a"));
    const row = encodeBatch(records);
    expect(row.records.split("kms.v1.KeyManagerService/Encrypt")).toHaveLength(2);
    expect(row.records.length / records.length).toBeLessThan(40);
    expect(decodeBatch(row.records)).toEqual(records);
    const stored = JSON.stringify([[5, "p-1", "kms.v1.KeyManagerService/Encrypt", "grpc", "kms-namespace:team-a", "/v1/keys/a", 0, "req-5"]]);
    expect(decodeBatch(stored)).toEqual([record(5, "p-1", "/v1/keys/a")]);
    expect(() => decodeBatch(JSON.stringify({ at: 0, strings: [], rows: [[0, 0, 0, 0, 0, 0, 0, "r"]] }))).toThrow(/names string 0 of 0/);
  });

  it("selects by time, principal, resource prefix or scope, oldest first, up to the limit", () => {
    const batches = [
      encodeBatch([record(1, "p-1", "/v1/keys/a"), record(2, "p-2", "/v1/keys/a/versions/2")]),
      encodeBatch([record(3, "p-1", "/v1/keys/ab"), record(4, "p-1", "/v1/keys/b", 5)]),
    ];
    const at = (rs: AuditRecord[]) => rs.map((r) => r.at);
    expect(at(selectRecords(batches, { limit: 10 }))).toEqual([1, 2, 3, 4]);
    expect(at(selectRecords(batches, { limit: 3 }))).toEqual([1, 2, 3]);
    expect(at(selectRecords(batches, { limit: 0 }))).toEqual([]);
    expect(at(selectRecords(batches, { since: 2, until: 4, limit: 10 }))).toEqual([2, 3]);
    expect(at(selectRecords(batches, { principal: "p-1", limit: 10 }))).toEqual([1, 3, 4]);
    expect(at(selectRecords(batches, { resource: "/v1/keys/a", limit: 10 }))).toEqual([1, 2]);
    expect(at(selectRecords(batches, { resource: "kms-namespace:team-a", limit: 2 }))).toEqual([1, 2]);
    expect(batchInRange(batches[0]!, { since: 3, limit: 1 })).toBe(false);
    expect(batchInRange(batches[1]!, { until: 3, limit: 1 })).toBe(false);
    expect(batchInRange(batches[1]!, { since: 4, until: 5, limit: 1 })).toBe(true);
  });

  it("selects by a resource path its sub-resources and custom methods, not a resource whose id only starts alike", () => {
    const batches = [encodeBatch([record(1, "p-1", "/cluster/v1/vdc-a/tasks/t1:wait"), record(2, "p-1", "/cluster/v1/vdc-a/tasks/t1/x"), record(3, "p-1", "/cluster/v1/vdc-a/tasks/t10:wait")])];
    expect(selectRecords(batches, { resource: "/cluster/v1/vdc-a/tasks/t1", limit: 10 }).map((r) => r.at)).toEqual([1, 2]);
  });

  it("answers the operator's queries from the embedded store, a batch spanning the range included", async () => {
    const db = new Database(":memory:");
    migrate(db, "upgrade");
    const store = new SqliteAuditStore(db);
    await store.append([record(100, "p-1", "/v1/keys/a"), record(200, "p-2", "/v1/keys/b")]);
    await store.append([]);
    await store.append([record(300, "p-1", "/v1/keys/c")]);
    expect(db.prepare("SELECT COUNT(*) FROM audit_batches").pluck().get()).toBe(2);
    expect((await store.query({ limit: 10 })).map((r) => r.at)).toEqual([100, 200, 300]);
    expect((await store.query({ since: 150, until: 300, limit: 10 })).map((r) => r.at)).toEqual([200]);
    expect((await store.query({ principal: "p-1", limit: 1 })).map((r) => r.at)).toEqual([100]);
    db.close();
  });

  it("keeps the records stored before, one row each, as batches of one in their order", async () => {
    const db = new Database(":memory:");
    // A store as migration 4 left it: the trail a row to a record.
    db.exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL) STRICT`);
    migrateTo(db, 4);
    const insert = db.prepare("INSERT INTO audit_records (at, principal, method, protocol, scope, resource, code, request_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    const before = [record(5, "p-1", "/v1/keys/a"), record(3, "p-2", "/v1/keys/\"b\"", 9)];
    for (const r of before) insert.run(r.at, r.principal, r.method, r.protocol, r.scope, r.resource, r.code, r.requestId);
    migrate(db, "upgrade");
    expect(await new SqliteAuditStore(db).query({ limit: 10 })).toEqual(before);
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'audit_records'").get()).toBeUndefined();
    db.close();
  });
});

// Applies the embedded store's migrations up to `version` only, as an older server did.
function migrateTo(db: Database.Database, version: number): void {
  // migrate() has no "up to": the later migrations are marked done while it runs, then unmarked.
  const later = db.prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)");
  for (const v of SCHEMA_VERSIONS) if (v > version) later.run(v);
  migrate(db, "upgrade");
  db.prepare("DELETE FROM schema_migrations WHERE version > ?").run(version);
}
