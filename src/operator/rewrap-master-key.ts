import { writeSync } from "node:fs";
import { parseArgs } from "node:util";
import { rewrapMasterKey } from "../kms/master-key-rewrap.js";
import type { RewrapStep } from "../kms/master-key-rewrap.js";
import { readMasterKeyMaterial, resolveMasterKey } from "../kms/master-key-source.js";
import type { MasterKeyNotices } from "../kms/master-key-source.js";
import { databasePath, openDatabaseExclusively } from "../storage/sqlite/database.js";
import { SqliteKmsStore } from "../storage/sqlite/sqlite-kms-store.js";

// npm run rewrap-master-key -- --data-dir DIR --new-master-key-file FILE
//
// Re-wraps every stored key material under a new master key, atomically (src/kms/master-key-rewrap.ts). The server
// must be stopped: the command holds the database exclusively and refuses to run while anything else has it open.

const help = `Usage: npm run rewrap-master-key -- --data-dir DIR --new-master-key-file FILE

Re-wraps every stored key material of the data directory under a new master key, in one transaction, and records
the new key's check value. Stop the server first; the command refuses to run while the data directory is open.

  --data-dir DIR              data directory (DATA_DIR; default ./data)
  --new-master-key-file FILE  the new 32-byte key, raw or base64 (make one with: openssl rand -base64 32 > FILE)
  --master-key-file FILE      the current key's file (MASTER_KEY_FILE); given, it wins over MASTER_KEY
  --help                      print this text

The current key is read as the server reads it: MASTER_KEY, else MASTER_KEY_FILE, else <data-dir>/master.key.
With <data-dir>/master.key, the command puts the new key in its place (through master.key.new). With MASTER_KEY or
MASTER_KEY_FILE, it leaves the key files alone: start the server with the new key afterwards.
`;

class UsageError extends Error {}

function print(line: string): void {
  writeSync(1, `${line}\n`);
}

// Test-only: CLOUDPLANE_TEST_REWRAP_PAUSE_AT=<step> stops the command for good after that step, so that a test can
// kill it there (test/e2e/master-key-rewrap.test.ts). The line goes out before the process blocks.
function pauseForTests(step: RewrapStep): void {
  if (process.env.CLOUDPLANE_TEST_REWRAP_PAUSE_AT !== step) return;
  writeSync(2, `paused at ${step}\n`);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
}

const notices: MasterKeyNotices = {
  info: (_fields, message) => print(message),
  warn: (_fields, message) => print(message),
};

async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  let values;
  try {
    values = parseArgs({
      args: argv,
      options: {
        "data-dir": { type: "string" },
        "new-master-key-file": { type: "string" },
        "master-key-file": { type: "string" },
        help: { type: "boolean" },
      },
      strict: true,
    }).values;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help === true) {
    process.stdout.write(help);
    return;
  }
  const newKeyFile = values["new-master-key-file"];
  if (newKeyFile === undefined || newKeyFile === "") throw new UsageError("--new-master-key-file is required");
  const settings = {
    dataDir: values["data-dir"] ?? env.DATA_DIR ?? "./data",
    masterKeyFile: values["master-key-file"] ?? env.MASTER_KEY_FILE ?? "",
    masterKey: values["master-key-file"] === undefined ? (env.MASTER_KEY ?? "") : "",
  };
  const next = readMasterKeyMaterial(newKeyFile, "--new-master-key-file");
  const db = openDatabaseExclusively(settings.dataDir);
  try {
    const store = new SqliteKmsStore(db);
    print(`data directory: ${settings.dataDir} (held exclusively until done)`);
    const current = await resolveMasterKey(settings, store, notices);
    const outcome = await rewrapMasterKey({
      store,
      dataDir: settings.dataDir,
      current,
      next,
      nextOrigin: newKeyFile,
      now: Date.now(),
      report: print,
      onStep: pauseForTests,
    });
    print(`done: ${outcome.rewrapped} key material(s) moved from key id ${outcome.oldKeyId} to key id ${outcome.newKeyId}`);
    // The rows hold the new wrapping only, but the file still held old ones: copies that earlier writes left in free
    // space (a row moved, a version erased before secure_delete), 35 of 60 live materials under the old key in a
    // probe (2026-11-28), which defeats a re-wrap made because the old key leaked. VACUUM rebuilds the file from the
    // live rows, and the log is emptied after it.
    print("erasing copies of the old wrapping from the database file (VACUUM)");
    // The re-wrap is committed: a failure from here on (VACUUM needs free space of about the database's size) must
    // not read as a failed re-wrap. It exited 1 with "rewrap-master-key failed: database or disk is full" after
    // "done", and a script that then deletes the new key file loses the only key that opens the data (a probe on a
    // full disk, 2026-11-28).
    try {
      if (process.env.CLOUDPLANE_TEST_REWRAP_FAIL_VACUUM === "1") throw new Error("database or disk is full (as a test asked)");
      db.exec("VACUUM");
      db.pragma("wal_checkpoint(TRUNCATE)");
    } catch (err) {
      process.stderr.write(
        `rewrap-master-key: the re-wrap is done (the data is under the new master key only), but erasing the old ` +
          `wrapping's copies from the file failed: ${err instanceof Error ? err.message : String(err)}. Keep the new key. ` +
          `Copies of the old wrapping may remain in the file's free space until it is rebuilt: free space (about the ` +
          `database's size) and run VACUUM on ${databasePath(settings.dataDir)} with the server stopped\n`,
      );
    }
  } finally {
    db.close();
  }
}

main(process.argv.slice(2), process.env).catch((err: unknown) => {
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`rewrap-master-key failed: ${message}\n${err instanceof UsageError ? `\n${help}` : ""}`);
  process.exitCode = err instanceof UsageError ? 2 : 1;
});
