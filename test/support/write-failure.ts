import { join } from "node:path";
import Database from "better-sqlite3";

// A storage failure in the middle of a write: a trigger that aborts every `event` on `table`, added from a
// connection of the test's own. A write that gets there after writing other rows fails halfway through its
// transaction, which is the case a store must roll back. Returns the function that removes the trigger again.
export function injectWriteFailure(dataDir: string, table: string, event: "INSERT" | "UPDATE" | "DELETE"): () => void {
  const run = (sql: string): void => {
    const db = new Database(join(dataDir, "cloudplane.db"), { fileMustExist: true });
    try {
      db.exec(sql);
    } finally {
      db.close();
    }
  };
  run(`CREATE TRIGGER injected_failure BEFORE ${event} ON "${table}" BEGIN SELECT RAISE(ABORT, 'injected storage failure'); END`);
  return () => run("DROP TRIGGER injected_failure");
}
