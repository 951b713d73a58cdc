import type pg from "pg";
import { first, transaction } from "./sql.js";

// A claim that finds its candidate taken meanwhile looks for the next one, a few times, then leaves it to the next
// pass of the worker.
const MAX_CLAIM_TRIES = 5;

export interface ClaimQuery {
  // The task table, aliased `t` in `claimable`.
  table: string;
  // Which rows worker $1 may claim, with $2 the time before which a heartbeat is stale; may read the worker row `w`
  // (compute_workers joined on t.claimed_by).
  claimable: string;
  // The statement (and its values) that marks the row of `seq` as claimed by the worker and returns it
  // (`RETURNING *`).
  update(seq: number, workerId: string, now: number): { text: string; values: unknown[] };
}

// Claims the oldest claimable task of a table in one transaction, for node pool and vApp tasks alike. Candidates are
// taken oldest first with FOR UPDATE SKIP LOCKED (a row another claimer holds is skipped, not waited for), then
// checked again by a statement of their own, now that the row is ours, on everything committed: a row that another
// claimer changed and committed while this one waited for it is re-checked by PostgreSQL against its new version but
// with the worker row as the first statement saw it (none, for a task nobody held), which would let a task be taken
// from a live worker.
export function claimOldest<Row>(pool: pg.Pool, q: ClaimQuery, workerId: string, now: number, staleBefore: number): Promise<Row | null> {
  const from = `FROM ${q.table} t LEFT JOIN compute_workers w ON w.id = t.claimed_by`;
  return transaction(pool, async (client) => {
    for (let tries = 0; tries < MAX_CLAIM_TRIES; tries++) {
      const candidate = await first<{ seq: number }>(
        client,
        `SELECT t.seq ${from} WHERE ${q.claimable} ORDER BY t.seq LIMIT 1 FOR UPDATE OF t SKIP LOCKED`,
        [workerId, staleBefore],
      );
      if (candidate === null) return null;
      const still = await first<{ seq: number }>(client, `SELECT t.seq ${from} WHERE t.seq = $3 AND ${q.claimable}`, [workerId, staleBefore, candidate.seq]);
      if (still === null) continue;
      const update = q.update(candidate.seq, workerId, now);
      return first<Row>(client, update.text, update.values);
    }
    return null;
  });
}
