import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, helpText, loadConfig } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { openStorage } from "../../src/storage/open-storage.js";
import { tempDir } from "../support/temp-dir.js";

// The settings of the PostgreSQL store, and a database that cannot be reached.

// A master key of the right form (its form is checked with the settings).
const A_KEY = Buffer.alloc(32, 1).toString("base64");

describe("DATABASE_URL", () => {
  it("is listed by --help with its flag, and read from the environment or the flag", () => {
    expect(helpText()).toMatch(/--database-url\s+DATABASE_URL\s+PostgreSQL connection URL/);
    expect(helpText()).toMatch(/--database-pool-size\s+DATABASE_POOL_SIZE/);
    // The file is checked at once (src/shared/setting-file.ts), so it must be there.
    const dir = tempDir();
    const keyFile = join(dir.path, "k");
    writeFileSync(keyFile, Buffer.alloc(32));
    const fromEnv = loadConfig([], { DATABASE_URL: "postgres://db/x", MASTER_KEY_FILE: keyFile });
    dir.remove();
    expect(fromEnv !== "help" && [fromEnv.databaseUrl, fromEnv.databasePoolSize]).toEqual(["postgres://db/x", 10]);
    const fromFlag = loadConfig(["--database-url", "postgres://db/y", "--database-pool-size", "3"], { MASTER_KEY: A_KEY });
    expect(fromFlag !== "help" && [fromFlag.databaseUrl, fromFlag.databasePoolSize]).toEqual(["postgres://db/y", 3]);
  });

  it("needs a configured master key, which every server shares", () => {
    expect(() => loadConfig([], { DATABASE_URL: "postgres://db/x" })).toThrow(ConfigError);
    expect(() => loadConfig([], { DATABASE_URL: "postgres://db/x" })).toThrow(
      "--database-url (DATABASE_URL) needs --master-key-file (MASTER_KEY_FILE) or MASTER_KEY: every server on the database must use the same master key",
    );
    expect(() => loadConfig([], { DATABASE_URL: "postgres://db/x", DATABASE_POOL_SIZE: "0", MASTER_KEY: A_KEY })).toThrow(
      '--database-pool-size (DATABASE_POOL_SIZE) must be an integer from 1 to 1000, got "0"',
    );
  });

  it("that cannot be reached fails the start with a message naming the setting, not the URL's password", async () => {
    const opening = openStorage({ dataDir: "/nonexistent", databaseUrl: "postgres://cloudplane:s3cret@127.0.0.1:1/db", databasePoolSize: 2, databaseQueryTimeoutMs: 10_000 }, createLogger("silent"));
    await expect(opening).rejects.toThrow(/^could not open the PostgreSQL database of DATABASE_URL: connect ECONNREFUSED 127\.0\.0\.1:1$/);
    await expect(opening).rejects.not.toThrow(/s3cret/);
  });
});
