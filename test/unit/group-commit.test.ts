import Database from "better-sqlite3";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openDatabase } from "../../src/storage/sqlite/database.js";
import { GroupCommit } from "../../src/storage/sqlite/group-commit.js";
import { tempDir } from "../support/temp-dir.js";

// Writes handed over in one turn of the event loop share one commit; each still succeeds or fails on its own.
describe("GroupCommit", () => {
  let dir: ReturnType<typeof tempDir>;
  let db: Database.Database;
  let observer: Database.Database;

  beforeEach(() => {
    dir = tempDir();
    db = openDatabase(dir.path, "upgrade");
    db.exec("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)");
    // PRAGMA data_version, read on another connection, changes once per commit made on any other connection.
    observer = new Database(join(dir.path, "cloudplane.db"));
  });

  afterEach(() => {
    observer.close();
    db.close();
    dir.remove();
  });

  const commitsSeen = (): number => observer.pragma("data_version", { simple: true }) as number;
  const rows = (): unknown[] => observer.prepare("SELECT k, v FROM t ORDER BY k").all();

  it("commits 64 writes of one turn in one transaction, and each caller gets its own result", async () => {
    const group = new GroupCommit(db);
    const insert = db.prepare("INSERT INTO t VALUES (?, ?)");
    const before = commitsSeen();
    // What another connection sees while each write runs: with one commit per write it would see the earlier ones.
    const seenDuring: number[] = [];
    const results = await Promise.all(
      Array.from({ length: 64 }, (_, i) =>
        group.run(() => {
          const changes = insert.run(`k${String(i).padStart(2, "0")}`, i).changes;
          seenDuring.push(rows().length);
          return changes + i;
        }),
      ),
    );
    expect(results).toEqual(Array.from({ length: 64 }, (_, i) => 1 + i));
    expect(seenDuring).toEqual(Array(64).fill(0));
    expect(commitsSeen()).not.toBe(before);
    expect(rows()).toHaveLength(64);
  });

  it("rolls back and rejects only the write that throws; the writes after it see those before it", async () => {
    const group = new GroupCommit(db);
    const insert = db.prepare("INSERT INTO t VALUES (?, ?)");
    const count = db.prepare("SELECT count(*) FROM t").pluck();
    const outcomes = await Promise.allSettled([
      group.run(() => insert.run("a", 1)),
      // Writes a row and then fails: the row must not survive.
      group.run(() => {
        insert.run("b", 2);
        insert.run("a", 3);
      }),
      group.run(() => count.get()),
      group.run(() => {
        throw new Error("refused");
      }),
      group.run(() => insert.run("c", 4)),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled", "rejected", "fulfilled"]);
    expect((outcomes[1] as PromiseRejectedResult).reason).toMatchObject({ code: "SQLITE_CONSTRAINT_PRIMARYKEY" });
    expect((outcomes[2] as PromiseFulfilledResult<number>).value).toBe(1);
    expect((outcomes[3] as PromiseRejectedResult).reason).toEqual(new Error("refused"));
    expect(rows()).toEqual([
      { k: "a", v: 1 },
      { k: "c", v: 4 },
    ]);
  });

  it("rejects every caller of a batch whose commit cannot be made, and the next batch commits", async () => {
    const group = new GroupCommit(db);
    const insert = db.prepare("INSERT INTO t VALUES (?, ?)");
    // Another connection holds the write lock for longer than the busy timeout allows: BEGIN IMMEDIATE fails.
    db.pragma("busy_timeout = 0");
    observer.exec("BEGIN IMMEDIATE");
    const refused = await Promise.allSettled([group.run(() => insert.run("x", 1)), group.run(() => insert.run("y", 2))]);
    expect(refused.map((o) => o.status)).toEqual(["rejected", "rejected"]);
    expect((refused[0] as PromiseRejectedResult).reason).toMatchObject({ code: "SQLITE_BUSY" });
    observer.exec("ROLLBACK");
    await group.run(() => insert.run("z", 3));
    expect(rows()).toEqual([{ k: "z", v: 3 }]);
  });

  it("starts a new batch for writes handed over after the flush", async () => {
    const group = new GroupCommit(db);
    const insert = db.prepare("INSERT INTO t VALUES (?, ?)");
    await group.run(() => insert.run("a", 1));
    expect(rows()).toHaveLength(1);
    const between = commitsSeen();
    await group.run(() => insert.run("b", 2));
    expect(commitsSeen()).not.toBe(between);
    expect(rows()).toHaveLength(2);
  });
});
