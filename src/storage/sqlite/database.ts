import { mkdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { migrate } from "./migrations.js";

// Opens (creating if needed) the embedded database in the data directory. WAL with synchronous=FULL: every
// acknowledged write is on disk, so it survives kill -9 and a power cut alike; readers never block the writer.
export function openDatabase(dataDir: string): Database.Database {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const db = new Database(join(dataDir, "cloudplane.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.pragma("foreign_keys = ON");
  db.pragma("busy_timeout = 5000");
  migrate(db);
  return db;
}
