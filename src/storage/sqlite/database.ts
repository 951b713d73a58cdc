import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { createPrivateFile, restrictToOwner } from "../../shared/private-file.js";
import type { MigrationMode } from "../schema-version.js";
import { migrate } from "./migrations.js";

const DATABASE_FILE = "cloudplane.db";
// Held by the server that has the data directory open (lockDataDirectory).
const SERVER_LOCK_FILE = "cloudplane.lock";

// Opens (creating if needed) the embedded database in the data directory. WAL with synchronous=FULL: every
// acknowledged write is on disk, so it survives kill -9 and a power cut alike; readers never block the writer.
//
// SQLite would create the main file 0644 less the umask, and then gives -wal and -shm the main file's mode. So the
// main file is created 0600 before SQLite opens it (an empty file is an empty database), and the other two follow.
export function openDatabase(dataDir: string, mode: MigrationMode): Database.Database {
  const db = openUnmigrated(dataDir);
  try {
    migrate(db, mode);
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

// openDatabase before its migrations, for a server that judges its master key first (sqlite-storage.ts).
export function openUnmigrated(dataDir: string): Database.Database {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const path = databasePath(dataDir);
  createPrivateFile(path);
  // Left behind by a crash of a version that did not restrict them; SQLite reuses them as they are.
  restrictToOwner(`${path}-wal`);
  restrictToOwner(`${path}-shm`);
  const db = new Database(path);
  try {
    configure(db);
  } catch (err) {
    db.close();
    // Only a connection in EXCLUSIVE locking mode refuses this one, and only an operator command opens one.
    if ((err as { code?: string }).code === "SQLITE_BUSY") throw new DatabaseInUseError(openElsewhere(path));
    throw err;
  }
  db.pragma("busy_timeout = 5000");
  return db;
}

// Another process has the data directory: main.ts exits 2, as for a setting the server cannot use.
export class DatabaseInUseError extends Error {}

// One server per data directory. SQLite has no change feed between processes, so a second server on the same
// database kept serving key versions the first had disabled or destroyed from its cache (a probe of 82d22ee), and
// every server connection holds only a shared lock, which another server's shares. So the server also holds an
// exclusive lock on an empty SQLite file of its own for as long as it runs: the mechanism of
// openDatabaseExclusively, on a file no other connection of the server uses (the server's own connections and its
// checkpoint worker would be locked out of cloudplane.db). The lock is the kernel's, so a server killed with SIGKILL
// leaves only the empty file, which the next start locks again. Closing the returned connection releases it.
export function lockDataDirectory(dataDir: string): Database.Database {
  const path = join(dataDir, SERVER_LOCK_FILE);
  createPrivateFile(path);
  const lock = new Database(path, { timeout: 0 });
  try {
    lock.pragma("locking_mode = EXCLUSIVE");
    // Nothing is stored in it; a journal on disk would stay beside it for as long as the lock is held.
    lock.pragma("journal_mode = MEMORY");
    lock.exec("BEGIN EXCLUSIVE; COMMIT");
  } catch (err) {
    lock.close();
    if ((err as { code?: string }).code === "SQLITE_BUSY") {
      throw new DatabaseInUseError(
        `the data directory ${dataDir} is in use: another cloudplane server holds ${path}. Stop that server first; ` +
          "to run several servers on one store, point them all at one PostgreSQL database (DATABASE_URL, README \"Scale-out\")",
      );
    }
    throw err;
  }
  return lock;
}

export function databasePath(dataDir: string): string {
  return join(dataDir, DATABASE_FILE);
}

// Opens the existing database of the data directory for an operator command that must be its only user (the master
// key re-wrap). The connection takes an exclusive lock on the file at its first access and keeps it until it is
// closed (EXCLUSIVE locking mode, which in WAL mode also does without the shared-memory index). Every open connection
// in WAL mode holds a shared lock on the file, so this fails at once while a server has the directory open, and a
// server started meanwhile waits its busy timeout and fails to start. The lock is the kernel's: a command killed with
// SIGKILL leaves none behind.
export function openDatabaseExclusively(dataDir: string): Database.Database {
  const path = databasePath(dataDir);
  if (!existsSync(path)) throw new Error(`${path} does not exist: ${dataDir} is not a data directory of cloudplane`);
  restrictToOwner(path);
  restrictToOwner(`${path}-wal`);
  restrictToOwner(`${path}-shm`);
  const db = lockedExclusively(path, `${path} is in use (a server or another command has it open): stop it first`);
  try {
    configure(db);
    // Only a server upgrades a store (schema-version.ts).
    migrate(db, "current only");
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

// A connection to an existing database that holds it exclusively (see openDatabaseExclusively), or DatabaseInUseError
// with `inUse` when another connection has it open.
function lockedExclusively(path: string, inUse: string): Database.Database {
  const db = new Database(path, { fileMustExist: true });
  db.pragma("locking_mode = EXCLUSIVE");
  db.pragma("busy_timeout = 0");
  try {
    db.exec("BEGIN EXCLUSIVE; COMMIT");
  } catch (err) {
    db.close();
    if ((err as { code?: string }).code === "SQLITE_BUSY") throw new DatabaseInUseError(inUse);
    throw err;
  }
  return db;
}

// A server holding the data directory's lock (lockDataDirectory) can still find the database open in another
// process: a server of a build from before that lock (before 2026-11-27) holds none, so a new build started beside
// it came up too, upgraded the store under it, and both served, the old one versions the new one had disabled (a
// probe, 2026-11-28). So a starting server also makes sure, as the re-wrap does, that nothing else has the database
// open; an operator command reading it at that moment makes the start fail as well, saying so.
export function refuseOtherConnections(dataDir: string): void {
  const path = databasePath(dataDir);
  if (!existsSync(path)) return;
  lockedExclusively(path, openElsewhere(path)).close();
}

// Why a starting server cannot have the database: another process has it open (a re-wrap holds it exclusively).
function openElsewhere(path: string): string {
  return (
    `${path} is open in another process: an operator command (npm run rewrap-master-key, cloudplane-admin), or a ` +
    `cloudplane server of an older build, which holds no ${SERVER_LOCK_FILE}. Wait for the command to finish, or stop ` +
    "that server, then start again"
  );
}

function configure(db: Database.Database): void {
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.pragma("foreign_keys = ON");
  // Deleted and overwritten content is zeroed in the page, not left in its free space: the sweeper's erasure of a
  // destroyed version's material wrote NULL over the row and left the wrapped bytes beside it, where the data
  // directory's master.key unwrapped them (a probe, 2026-11-28). The log's older copies are dropped after each
  // erasure (SqliteKmsStore.scrubErased).
  db.pragma("secure_delete = ON");
}

// A second connection to a database openDatabase has opened, for the audit trail (sqlite-audit-store.ts explains
// its synchronous=NORMAL).
export function openAuditConnection(dataDir: string): Database.Database {
  const db = new Database(databasePath(dataDir), { fileMustExist: true });
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("busy_timeout = 5000");
  return db;
}
