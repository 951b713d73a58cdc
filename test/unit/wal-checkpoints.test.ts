import { closeSync, openSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import type Database from "better-sqlite3";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import { databasePath, openDatabase } from "../../src/storage/sqlite/database.js";
import { WalCheckpoints } from "../../src/storage/sqlite/wal-checkpoints.js";
import { logLines } from "../support/log-lines.js";
import { tempDir } from "../support/temp-dir.js";

const PAGE_BYTES = 4096;
const ROWS = 3000;
const RESTARTS = 3;
const MAX_LOG_PAGES = 40_000;

function autocheckpointPages(db: Database.Database): number {
  return db.pragma("wal_autocheckpoint", { simple: true }) as number;
}

// How many times the log was started over: the checkpoint sequence number in its header (bytes 12-15, big-endian),
// which SQLite adds one to at each restart.
function walRestarts(walPath: string): number {
  const header = Buffer.alloc(32);
  const fd = openSync(walPath, "r");
  try {
    readSync(fd, header, 0, header.length, 0);
  } finally {
    closeSync(fd);
  }
  return header.readUInt32BE(12);
}

const WARM_UP_ROWS = 100;

// Commits WARM_UP_ROWS pages and waits until the worker has checkpointed them (the database file grows only by
// checkpoints), so that what a test measures begins with the worker running, however long its start took.
async function workerCheckpointing(path: string, insert: Database.Statement, page: Buffer): Promise<void> {
  for (let i = 0; i < WARM_UP_ROWS; i++) insert.run(page);
  await expect.poll(() => statSync(path).size, { timeout: 10_000 }).toBeGreaterThan(WARM_UP_ROWS * PAGE_BYTES);
}

describe("WalCheckpoints", () => {
  const dir = tempDir();
  let db: Database.Database | null = null;
  let checkpoints: WalCheckpoints | null = null;

  afterEach(async () => {
    await checkpoints?.close();
    db?.close();
    checkpoints = null;
    db = null;
  });
  afterAll(() => dir.remove());

  it("turns the connections' own checkpoints off and keeps the log small from its worker", async () => {
    db = openDatabase(join(dir.path, "working"), "upgrade");
    const path = databasePath(join(dir.path, "working"));
    checkpoints = new WalCheckpoints(path, [db], createLogger("silent"), 20);
    expect(autocheckpointPages(db)).toBe(0);

    db.exec("CREATE TABLE filler (page BLOB NOT NULL)");
    const insert = db.prepare("INSERT INTO filler (page) VALUES (?)");
    const page = Buffer.alloc(PAGE_BYTES - 100, 7);
    // Under a heavy load the worker's start alone let the log pass 1,000 pages.
    await workerCheckpointing(path, insert, page);
    // A page a commit, with pauses in which the worker can checkpoint, as between the turns of a busy server.
    for (let i = WARM_UP_ROWS; i < ROWS; i++) {
      insert.run(page);
      if (i % 100 === 99) await new Promise((resolve) => setTimeout(resolve, 30));
    }

    // Nobody checkpointed inside a commit (automatic checkpoints are off): without the worker the log would hold
    // every one of the 3,000 pages; SQLite's own checkpoints would have let it reach 1,000.
    const walBytes = statSync(`${path}-wal`).size;
    expect(walBytes).toBeLessThan(1000 * PAGE_BYTES);
    expect(db.prepare("SELECT count(*) AS n FROM filler").get()).toEqual({ n: ROWS });
  });

  it("lets the log start over under commits that never pause", async () => {
    db = openDatabase(join(dir.path, "steady"), "upgrade");
    const path = databasePath(join(dir.path, "steady"));
    checkpoints = new WalCheckpoints(path, [db], createLogger("silent"), 20);
    // Commits not synced one by one: what is tested is where the log starts over, not what a crash keeps, and 20,000
    // synced commits took 6 s alone and over 30 s beside CI's other test files on a slow disk.
    db.pragma("synchronous = NORMAL");

    db.exec("CREATE TABLE filler (page BLOB NOT NULL)");
    const insert = db.prepare("INSERT INTO filler (page) VALUES (?)");
    const page = Buffer.alloc(PAGE_BYTES - 100, 7);
    // Beside CI's other files the worker's start once took longer than the loop below took to write its 40,000 pages.
    await workerCheckpointing(path, insert, page);
    // A page a commit, a few commits a turn of the event loop, as under a steady load: some commit always lands
    // while the worker's checkpoint runs, so the worker alone never finishes one, and SQLite starts the log over only
    // after a finished one. Until it has started over a few times, or until the log holds far more than it does when
    // it starts over (measured: 2,000 commits, 6,000 pages, between restarts; a slow machine commits more slowly too).
    let rows = WARM_UP_ROWS;
    while (walRestarts(`${path}-wal`) < RESTARTS && statSync(`${path}-wal`).size < MAX_LOG_PAGES * PAGE_BYTES) {
      for (let i = 0; i < 20; i++) insert.run(page);
      rows += 20;
      await new Promise((resolve) => setImmediate(resolve));
    }

    // Without the server's finishing checkpoints the log never started over, and held every page written.
    expect(walRestarts(`${path}-wal`)).toBe(RESTARTS);
    expect(db.prepare("SELECT count(*) AS n FROM filler").get()).toEqual({ n: rows });
  });

  it("gives the connections their own checkpoints back, and says so, when the worker fails", async () => {
    db = openDatabase(join(dir.path, "failing"), "upgrade");
    const { logger, lines } = logLines();
    // The worker cannot open a database that does not exist.
    checkpoints = new WalCheckpoints(join(dir.path, "missing", "cloudplane.db"), [db], logger, 20);
    await expect.poll(() => autocheckpointPages(db!)).toBe(1000);
    expect(lines()).toContainEqual(
      expect.objectContaining({ level: 50, msg: "the WAL checkpoint worker failed; the database's connections checkpoint it themselves again" }),
    );
  });
});
