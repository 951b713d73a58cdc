import type { Logger } from "pino";
import { openSqliteStorage } from "./sqlite/sqlite-storage.js";
import type { BeforeMigrations, Storage, StorageOpener } from "./storage.js";

export interface StorageSettings {
  dataDir: string;
  databaseUrl: string;
  databasePoolSize: number;
  databaseQueryTimeoutMs: number;
}

// The one place that chooses the store: PostgreSQL when DATABASE_URL is set (several servers share it), else the
// embedded SQLite store of the data directory. The PostgreSQL store (and its driver) is loaded only when chosen:
// loading it costs about a tenth of a second of every start on the embedded store (docs/performance.md).
// `beforeMigrations` runs before a server upgrades the store (schema-version.ts).
export async function openStorage(
  settings: StorageSettings,
  logger: Logger,
  opener: StorageOpener = "server",
  beforeMigrations: BeforeMigrations | null = null,
): Promise<Storage> {
  if (settings.databaseUrl === "") return openSqliteStorage(settings.dataDir, logger, opener, beforeMigrations);
  const { openPostgresStorage } = await import("./postgres/postgres-storage.js");
  return openPostgresStorage({ url: settings.databaseUrl, poolSize: settings.databasePoolSize, queryTimeoutMs: settings.databaseQueryTimeoutMs }, logger, opener === "server" ? "upgrade" : "current only", beforeMigrations);
}
