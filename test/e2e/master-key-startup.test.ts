import { randomBytes } from "node:crypto";
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { masterKeyCheck } from "../../src/kms/master-key-check.js";
import { MasterKey } from "../../src/kms/master-key.js";
import { openAll, ownKeyFile, ownKeyFiles, sealSome, startExpectingRefusal } from "../support/master-key-processes.js";
import type { Sealed } from "../support/master-key-processes.js";
import { spawnServer } from "../support/server.js";
import { storeSnapshot } from "../support/store-snapshot.js";
import { tempDir } from "../support/temp-dir.js";

// A data directory is bound to the master key its material is wrapped under (docs/master-key-check.md): the server,
// started as an operator starts it, refuses another key or a missing master.key before it listens, exits 1 with a
// message saying what is wrong and what to do, and changes nothing stored.

const ownLayout = { MASTER_KEY: "" };
const keyIdOf = (base64: string): string => masterKeyCheck(new MasterKey(Buffer.from(base64, "base64"))).keyId;

describe("start-up against the master key the data was written with", () => {
  const dir = tempDir();
  const dataDir = join(dir.path, "data");
  let sealed: Sealed[];
  let ownKey: string;

  beforeAll(async () => {
    const server = await spawnServer({ dataDir, env: ownLayout });
    sealed = await sealSome(server.url, 3);
    await server.kill("SIGTERM");
    ownKey = readFileSync(ownKeyFile(dataDir), "utf8");
  });

  afterAll(() => dir.remove());

  // Every row, and the key files, as they were.
  function expectUnchanged(before: ReturnType<typeof storeSnapshot>): void {
    expect(storeSnapshot(dataDir)).toEqual(before);
    expect(ownKeyFiles(dataDir)).toEqual([ownKey, null]);
  }

  it("refuses another key from MASTER_KEY or MASTER_KEY_FILE, naming both key ids, and changes nothing", async () => {
    const before = storeSnapshot(dataDir);
    const wrong = randomBytes(32).toString("base64");
    const byEnv = await startExpectingRefusal(dataDir, { MASTER_KEY: wrong });
    expect(byEnv.code).toBe(1);
    expect(byEnv.stderr).toBe(
      `cloudplane failed to start: the master key from MASTER_KEY (key id ${keyIdOf(wrong)}) does not match the one the ` +
        `data directory ${dataDir} was written with (key id ${keyIdOf(ownKey)}, from the check value stored with the data); ` +
        "nothing was changed. Start with the original master key (MASTER_KEY, MASTER_KEY_FILE or <data-dir>/master.key), " +
        "or, to move the data to another master key, run `npm run rewrap-master-key` with the original one configured " +
        '(README, "Settings and the master key")\n',
    );
    expect(byEnv.stdout).not.toContain("listening");
    expectUnchanged(before);

    const wrongFile = join(dir.path, "wrong.key");
    writeFileSync(wrongFile, randomBytes(32), { mode: 0o600 });
    const byFile = await startExpectingRefusal(dataDir, { MASTER_KEY_FILE: wrongFile });
    expect(byFile.code).toBe(1);
    expect(byFile.stderr).toContain(`the master key from ${wrongFile} (key id `);
    expect(byFile.stderr).toContain(`(key id ${keyIdOf(ownKey)}, from the check value stored with the data)`);
    expectUnchanged(before);
  });

  it("refuses to start without master.key rather than generating a new one, and starts once it is back", async () => {
    const before = storeSnapshot(dataDir);
    const away = join(dir.path, "master.key.backup");
    renameSync(ownKeyFile(dataDir), away);
    const refused = await startExpectingRefusal(dataDir, ownLayout);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      `cloudplane failed to start: the master key file ${ownKeyFile(dataDir)} is missing, but the data directory ${dataDir} ` +
        `holds keys wrapped under a master key (key id ${keyIdOf(ownKey)}); no new one was generated, since it could not ` +
        "unwrap them. Restore master.key from your backup, or configure the original key with MASTER_KEY_FILE or MASTER_KEY\n",
    );
    expect(ownKeyFiles(dataDir)).toEqual([null, null]);
    expect(storeSnapshot(dataDir)).toEqual(before);

    renameSync(away, ownKeyFile(dataDir));
    const server = await spawnServer({ dataDir, env: ownLayout });
    try {
      expect(await openAll(server.url, sealed)).toEqual([...sealed, ...sealed].map((s) => s.plaintext));
    } finally {
      await server.kill("SIGTERM");
    }
  });

  it("checks a store from before check values by unwrapping a stored material, then records the check value", async () => {
    // As the store was before the migration that added the check value.
    const db = new Database(join(dataDir, "cloudplane.db"));
    db.exec("DROP TABLE kms_master_key; DELETE FROM schema_migrations WHERE version = 3");
    db.close();
    const before = storeSnapshot(dataDir);

    const refused = await startExpectingRefusal(dataDir, { MASTER_KEY: randomBytes(32).toString("base64") });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      new RegExp(
        `^cloudplane failed to start: the master key from MASTER_KEY \\(key id [0-9a-f]{16}\\) cannot unwrap the stored ` +
          `material of key [a-z2-7]{20} version \\d: the data directory ${dataDir} was written with another master key; nothing was changed`,
      ),
    );
    // Judged before the migrations: not even the check value's table was added.
    expect(storeSnapshot(dataDir)).toEqual(before);

    const server = await spawnServer({ dataDir, env: ownLayout });
    try {
      expect(server.logs()).toContain("recorded the master key's check value");
      expect(await openAll(server.url, sealed)).toEqual([...sealed, ...sealed].map((s) => s.plaintext));
    } finally {
      await server.kill("SIGTERM");
    }
    expect(storeSnapshot(dataDir).kms_master_key).toMatchObject([{ key_id: keyIdOf(ownKey) }]);
    expect((await startExpectingRefusal(dataDir, { MASTER_KEY: randomBytes(32).toString("base64") })).stderr).toContain(
      `(key id ${keyIdOf(ownKey)}, from the check value stored with the data)`,
    );
  });
});
