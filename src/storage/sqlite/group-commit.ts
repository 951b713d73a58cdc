import type Database from "better-sqlite3";

interface Pending {
  work: () => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

// Group commit: the writes that callers hand over during one turn of the event loop are made in ONE transaction,
// so that concurrent callers share one synchronous commit (one fsync of the WAL) instead of paying one each. With
// synchronous=FULL the commit is on disk before any of their promises resolves, so durability is what one
// transaction per write gave: nothing is acknowledged before it is on disk.
//
// Each write runs in its own savepoint (better-sqlite3 turns a transaction inside a transaction into one): a write
// that throws (a name already taken, a refused mutation) rolls back alone and rejects only its caller; the others
// still commit. Writes run in the order they were handed over, each seeing the ones before it, exactly as if they
// had been committed one after another. If the commit itself fails, every caller of the batch is rejected.
export class GroupCommit {
  private queue: Pending[] = [];
  private readonly flushBatch: (batch: Pending[]) => { ok: boolean; value: unknown }[];

  constructor(db: Database.Database) {
    this.flushBatch = db.transaction((batch: Pending[]) =>
      batch.map((p) => {
        try {
          return { ok: true, value: db.transaction(p.work)() };
        } catch (err) {
          return { ok: false, value: err };
        }
      }),
    ).immediate;
  }

  run<T>(work: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      // Flushed after the I/O callbacks of this turn, so that every request read in it joins the batch.
      if (this.queue.length === 0) setImmediate(() => this.flush());
      this.queue.push({ work, resolve: resolve as (value: unknown) => void, reject });
    });
  }

  private flush(): void {
    const batch = this.queue;
    this.queue = [];
    let outcomes;
    try {
      outcomes = this.flushBatch(batch);
    } catch (err) {
      for (const p of batch) p.reject(err);
      return;
    }
    batch.forEach((p, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) p.resolve(outcome.value);
      else p.reject(outcome.value);
    });
  }
}
