#!/usr/bin/env node
import { existsSync, writeSync } from "node:fs";
import { parseArgs } from "node:util";
import { AdminError, IdentityAdmin } from "../identity/identity-admin.js";
import { systemClock } from "../shared/clock.js";
import { createLogger } from "../logger.js";
import { openStorage } from "../storage/open-storage.js";
import { databasePath } from "../storage/sqlite/database.js";
import { adminHelp, runAdminCommand, UsageError } from "./admin-command.js";

// cloudplane-admin (npm run admin -- ...): service accounts, API keys, grants and the audit trail, on the store of
// a data directory, while the server runs or not (admin-command.ts has the commands).

// Writes all of the text, waiting while a pipe is full: stdout and stderr may be non-blocking pipes (Node makes them
// so once they are touched as streams), where writeSync throws EAGAIN or writes part of the text when the reader is
// slower than us; `audit --json | less` of thousands of records failed so, exit 1 halfway.
function writeAll(fd: number, text: string): void {
  let rest = Buffer.from(text);
  while (rest.length > 0) {
    try {
      rest = rest.subarray(writeSync(fd, rest));
    } catch (err) {
      if ((err as { code?: string }).code !== "EAGAIN") throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
    }
  }
}

// Set once the reader of stdout has gone (`audit | head -2`): the rest of the output is dropped and the command ends as
// it would have, without the "EPIPE: broken pipe" it printed; a pipeline's reader that stopped reading wanted no more.
let readerGone = false;

function print(line: string): void {
  if (readerGone) return;
  try {
    writeAll(1, `${line}\n`);
  } catch (err) {
    if ((err as { code?: string }).code !== "EPIPE") throw err;
    readerGone = true;
  }
}

function note(line: string): void {
  writeAll(2, `cloudplane-admin: ${line}\n`);
}

async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  // --data-dir and --help are read first; the command checks every argument (it knows --data-dir too).
  const { values } = parseArgs({
    args: argv,
    options: { "data-dir": { type: "string" }, help: { type: "boolean" } },
    strict: false,
    allowPositionals: true,
  });
  if (values.help === true || argv.length === 0) {
    print(adminHelp);
    return 0;
  }
  const dataDir = typeof values["data-dir"] === "string" ? values["data-dir"] : (env.DATA_DIR ?? "./data");
  const databaseUrl = env.DATABASE_URL ?? "";
  // Opening the embedded store creates it: a mistyped --data-dir would get a new, empty store that no server uses,
  // listed as empty and given accounts whose credentials work nowhere. Only the server creates a store (on its
  // first start); every command refuses a directory without one, creating nothing, as rewrap-master-key does.
  // With DATABASE_URL the data directory is not used.
  if (databaseUrl === "" && !existsSync(databasePath(dataDir))) {
    note(`${databasePath(dataDir)} does not exist: ${dataDir} is not a data directory of cloudplane\n(give the server's --data-dir or DATA_DIR; the server makes its store there on its first start)`);
    return 2;
  }
  // The servers' store: PostgreSQL when DATABASE_URL is set, as for the server; beside the running server.
  // An operator watches a command and can interrupt it: a statement may take as long as a server's statements may not
  // (a prune of a long trail), up to ten minutes.
  const databaseQueryTimeoutMs = 10 * 60_000;
  const storage = await openStorage({ dataDir, databaseUrl, databasePoolSize: 2, databaseQueryTimeoutMs }, createLogger("warn", process.stderr), "operator command");
  try {
    await runAdminCommand(argv, { admin: new IdentityAdmin(storage.identity, systemClock), audit: storage.audit, clock: systemClock, print, note });
    return 0;
  } catch (err) {
    if (err instanceof UsageError || err instanceof AdminError || (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      note(`${(err as Error).message}\n(cloudplane-admin --help lists the commands)`);
      return 2;
    }
    throw err;
  } finally {
    await storage.close();
  }
}

main(process.argv.slice(2), process.env).then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    note(err instanceof Error ? err.message : String(err));
    process.exitCode = 1;
  },
);
