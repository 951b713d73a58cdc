import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { DomainError } from "../../src/errors/domain-error.js";
import pg from "pg";
import { isStoreUnavailable } from "../../src/errors/store-unavailable.js";
import { fromDriver } from "../../src/storage/postgres/driver-errors.js";
import { callErrorOf } from "../../src/pipeline/call-error.js";

// A store that cannot do its work for now is UNAVAILABLE, told by the error's code; it was INTERNAL (two probes,
// 2026-11-28).
describe("isStoreUnavailable", () => {
  it("takes SQLite's full disk, I/O errors and locks, PostgreSQL's connection, resource and shutdown states, and lost connections", () => {
    const pgError = (code: string) => Object.assign(new Error("from the server"), { code, severity: "FATAL" });
    const netError = (code: string) => Object.assign(new Error("connect failed"), { code, syscall: "connect" });
    for (const err of [
      new Database.SqliteError("database or disk is full", "SQLITE_FULL"),
      new Database.SqliteError("disk I/O error", "SQLITE_IOERR_WRITE"),
      new Database.SqliteError("database is locked", "SQLITE_BUSY"),
      pgError("57P01"),
      pgError("08006"),
      pgError("53100"),
      pgError("57014"),
      pgError("55P03"),
      pgError("25P03"),
      netError("ECONNREFUSED"),
      netError("ECONNRESET"),
    ]) {
      expect(isStoreUnavailable(err), String((err as { code: string }).code)).toBe(true);
    }
  });

  it("takes node-postgres's own errors about its connection, which carry no code, as they come out of its calls", () => {
    for (const text of ["Connection terminated unexpectedly", "Query read timeout", "timeout exceeded when trying to connect"]) {
      const lost = new Error(text);
      const wrapped = fromDriver(lost);
      expect(isStoreUnavailable(wrapped), text).toBe(true);
      expect(wrapped).toMatchObject({ message: "the connection to PostgreSQL failed", cause: lost });
    }
    // The server's answers, socket errors and programming errors keep their class, and so their meaning.
    const fromServer = new pg.DatabaseError("duplicate key value", 0, "error");
    const socket = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET", syscall: "read" });
    const bug = new TypeError("cannot serialize");
    for (const err of [fromServer, socket, bug]) expect(fromDriver(err)).toBe(err);
  });

  it("leaves everything else to be INTERNAL or what it says", () => {
    for (const err of [
      new Database.SqliteError("UNIQUE constraint failed", "SQLITE_CONSTRAINT_UNIQUE"),
      Object.assign(new Error("syntax"), { code: "42601", severity: "ERROR" }),
      Object.assign(new Error("unique"), { code: "23505", severity: "ERROR" }),
      new Error("a fault of ours"),
      new TypeError("x is undefined"),
      new DomainError({ code: "unauthenticated", reason: "UNAUTHENTICATED", domain: "kms", message: "no" }),
      "SQLITE_FULL",
      null,
    ]) {
      expect(isStoreUnavailable(err)).toBe(false);
    }
  });

  it("makes the call's error UNAVAILABLE with STORE_UNAVAILABLE and a RetryInfo, not an internal one", () => {
    const error = callErrorOf(new Database.SqliteError("database or disk is full", "SQLITE_FULL"), "kms", "req-1");
    expect(error.internal).toBe(false);
    expect(error.status.code).toBe(14);
    expect(error.message).toContain("store cannot be written or reached for now");
  });
});
