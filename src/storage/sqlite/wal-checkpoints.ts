import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type Database from "better-sqlite3";
import type { Logger } from "pino";

// How often the worker checkpoints: a second of a steady Encrypt load adds about a thousand pages of audit trail.
export const CHECKPOINT_INTERVAL_MS = 1000;

// The worker's whole program, run as a CommonJS script (`eval`), so that it is the same plain JavaScript whether the
// server runs from dist/ or from src/ under tsx or vitest, which have no file to hand a worker. It opens its own
// connection and checkpoints in PASSIVE mode, which never waits for the server's connections and copies what
// they are not reading. synchronous=FULL: the database file is synced before the log is reused. When commits were
// made since its last checkpoint, it asks the server to finish (WalCheckpoints explains why).
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
db.pragma("synchronous = FULL");
let logged = 0;
const timer = setInterval(() => {
  // Pass after pass, while the one before found many new pages: each copies what was committed while the one before
  // ran, so that the server's finishing checkpoint has little left to copy on its event loop.
  let [{ log }] = db.pragma("wal_checkpoint(PASSIVE)");
  for (let pass = 2; pass <= 4; pass++) {
    const [again] = db.pragma("wal_checkpoint(PASSIVE)");
    const added = again.log - log;
    log = again.log;
    if (added < 64) break;
  }
  if (log !== logged) parentPort.postMessage("finish");
  logged = log;
}, workerData.intervalMs);
parentPort.on("message", () => {
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

// Checkpoints the write-ahead log of the embedded database from a worker thread, so that the server's own
// connections never do: SQLite otherwise runs a checkpoint inside whichever commit fills the log past 1,000 pages,
// and under a steady load of audited calls those commits held the event loop for 5-19 ms each (docs/storage.md).
// The connections' automatic checkpoints are turned off while the worker runs, and back on if it fails, so that the
// log never grows without bound.
//
// SQLite starts the log over (writes it again from its first page) only when a write begins after a checkpoint
// that copied all of it. Under a steady load some commit always lands while the worker's checkpoint runs, so the
// worker alone never finishes one, and the log grew by every page written: 250 MB in a few seconds of the test,
// and every commit slower as it grew. So the worker's checkpoints copy the bulk of the log, and then the server
// copies the few pages committed meanwhile with a checkpoint of its own, on its own thread, where no commit can come
// between that checkpoint and the next write. Under a steady Encrypt load that takes the event loop 0.04-0.5 ms
// once per interval (1.4-3 ms when the worker made one pass only; docs/storage.md).
export class WalCheckpoints {
  readonly #worker: Worker;
  readonly #exited: Promise<void>;
  #closing = false;

  constructor(path: string, connections: readonly Database.Database[], logger: Logger, intervalMs = CHECKPOINT_INTERVAL_MS) {
    // What each connection had (SQLite's default: a checkpoint inside the commit that takes the log past 1,000
    // pages), given back if the worker fails.
    const own = connections.map((db) => db.pragma("wal_autocheckpoint", { simple: true }) as number);
    for (const db of connections) db.pragma("wal_autocheckpoint = 0");
    const driver = createRequire(import.meta.url).resolve("better-sqlite3");
    this.#worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { driver, path, intervalMs } });
    // A server that is not closed (a test's) must still be able to exit.
    this.#worker.unref();
    this.#worker.on("error", (err) => {
      logger.error({ err }, "the WAL checkpoint worker failed; the database's connections checkpoint it themselves again");
      connections.forEach((db, i) => {
        if (db.open) db.pragma(`wal_autocheckpoint = ${own[i]!}`);
      });
    });
    this.#worker.on("message", () => {
      const db = connections[0];
      if (this.#closing || db === undefined || !db.open) return;
      try {
        db.pragma("wal_checkpoint(PASSIVE)");
      } catch (err) {
        // The log is then started over after a later checkpoint; nothing is lost meanwhile.
        logger.warn({ err }, "could not finish the WAL checkpoint");
      }
    });
    this.#exited = new Promise((resolve) => this.#worker.once("exit", () => resolve()));
  }

  // Stops the worker after the checkpoint it may be running; the server's last connection to close then checkpoints
  // what is left and removes the log, as SQLite does.
  async close(): Promise<void> {
    this.#closing = true;
    // Referenced again, so that the process waits for the worker rather than ending with nothing else to do.
    this.#worker.ref();
    this.#worker.postMessage("close");
    await this.#exited;
  }
}
