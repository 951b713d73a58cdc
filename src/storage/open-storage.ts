import type { Logger } from "pino";
import { openPostgresStorage } from "./postgres/postgres-storage.js";
import { openSqliteStorage } from "./sqlite/sqlite-storage.js";
import type { Storage } from "./storage.js";

export interface StorageSettings {
  dataDir: string;
  databaseUrl: string;
  databasePoolSize: number;
}

// The one place that chooses the store: PostgreSQL when DATABASE_URL is set (several servers share it), else the
// embedded SQLite store of the data directory.
export async function openStorage(settings: StorageSettings, logger: Logger): Promise<Storage> {
  if (settings.databaseUrl === "") return openSqliteStorage(settings.dataDir);
  return openPostgresStorage({ url: settings.databaseUrl, poolSize: settings.databasePoolSize }, logger);
}
