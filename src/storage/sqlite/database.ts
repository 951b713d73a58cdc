import { mkdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { createPrivateFile, restrictToOwner } from "../../shared/private-file.js";
import { migrate } from "./migrations.js";

// Opens (creating if needed) the embedded database in the data directory. WAL with synchronous=FULL: every
// acknowledged write is on disk, so it survives kill -9 and a power cut alike; readers never block the writer.
//
// SQLite would create the main file 0644 less the umask, and then gives -wal and -shm the main file's mode. So the
// main file is created 0600 before SQLite opens it (an empty file is an empty database), and the other two follow.
export function openDatabase(dataDir: string): Database.Database {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const path = join(dataDir, "cloudplane.db");
  createPrivateFile(path);
  // Left behind by a crash of a version that did not restrict them; SQLite reuses them as they are.
  restrictToOwner(`${path}-wal`);
  restrictToOwner(`${path}-shm`);
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.pragma("foreign_keys = ON");
  db.pragma("busy_timeout = 5000");
  migrate(db);
  return db;
}
