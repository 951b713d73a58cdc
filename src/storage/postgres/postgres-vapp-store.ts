import type pg from "pg";
import { vappNameTaken } from "../../compute/vapps/vapp-errors.js";
import type { VAppRecord, VAppTaskRecord } from "../../compute/vapps/vapp-model.js";
import type { VAppStore, VAppTaskFinish } from "../vapp-store.js";
import { vappFromRow, vappTaskFromRow, vappTaskToRow, vappToRow } from "../vapp-rows.js";
import type { VAppRow, VAppTaskRow } from "../vapp-rows.js";
import { announce, changeOf, first, insert, lockKinds, lockName, noRowHas, transaction } from "./sql.js";
import { claimOldest } from "./task-claim.js";
import type { ClaimQuery } from "./task-claim.js";

// Which vApp tasks a worker ($1) may claim: running ones nobody holds, and those of another worker whose heartbeat
// is older than $2 (or gone). A vApp task is stored running (vapp-manager.ts).
const CLAIMABLE = `t.status = 'running'
  AND (t.claimed_by IS NULL OR (t.claimed_by IS DISTINCT FROM $1 AND (w.heartbeat_at IS NULL OR w.heartbeat_at < $2)))`;

const CLAIM: ClaimQuery = {
  table: "vapp_tasks",
  claimable: CLAIMABLE,
  update: (seq, workerId) => ({ text: "UPDATE vapp_tasks SET claimed_by = $1, attempts = attempts + 1 WHERE seq = $2 RETURNING *", values: [workerId, seq] }),
};

// vApps and their tasks in PostgreSQL, shared by every server on the database, claimed as node pool tasks are
// (task-claim.ts). Workers' heartbeats are the compute store's (compute_workers).
export class PostgresVAppStore implements VAppStore {
  constructor(private readonly pool: pg.Pool) {}

  async createVApp(vapp: VAppRecord, task: VAppTaskRecord): Promise<void> {
    await transaction(this.pool, async (client) => {
      // Names are unique in a vDC: two servers creating the same name at once take turns here.
      await lockName(client, lockKinds.vappName, JSON.stringify([vapp.serviceInstanceId, vapp.name]));
      const holder = await first<{ id: string }>(client, "SELECT id FROM vapps WHERE service_instance_id = $1 AND name = $2", [
        vapp.serviceInstanceId,
        vapp.name,
      ]);
      if (holder !== null) throw vappNameTaken(vapp.serviceInstanceId, vapp.name, holder.id);
      const v = insert("vapps", vappToRow(vapp));
      await client.query(v.text, v.values);
      const t = insert("vapp_tasks", vappTaskToRow(task));
      await client.query(t.text, t.values);
      await announce(client, changeOf.taskStored());
    });
  }

  async getVApp(id: string): Promise<VAppRecord | null> {
    if (noRowHas(id)) return null;
    const row = await first<VAppRow>(this.pool, "SELECT * FROM vapps WHERE id = $1", [id]);
    return row === null ? null : vappFromRow(row);
  }

  async getVAppTask(id: string): Promise<VAppTaskRecord | null> {
    if (noRowHas(id)) return null;
    const row = await first<VAppTaskRow>(this.pool, "SELECT * FROM vapp_tasks WHERE id = $1", [id]);
    return row === null ? null : vappTaskFromRow(row);
  }

  async claimTask(workerId: string, now: number, staleBefore: number): Promise<VAppTaskRecord | null> {
    const row = await claimOldest<VAppTaskRow>(this.pool, CLAIM, workerId, now, staleBefore);
    return row === null ? null : vappTaskFromRow(row);
  }

  // As on the embedded store (sqlite-vapp-store.ts): the vApp keeps its task_id.
  async pruneFinishedTasks(before: number, limit: number): Promise<number> {
    const result = await this.pool.query(
      `DELETE FROM vapp_tasks WHERE seq IN (
         SELECT seq FROM vapp_tasks WHERE status IN ('success', 'error') AND ended_at < $1 ORDER BY ended_at LIMIT $2)`,
      [before, limit],
    );
    return result.rowCount ?? 0;
  }

  async finishVAppTask(
    taskId: string,
    workerId: string,
    decide: (task: VAppTaskRecord, vapp: VAppRecord) => VAppTaskFinish,
  ): Promise<VAppTaskFinish | null> {
    return transaction(this.pool, async (client) => {
      const row = await first<VAppTaskRow>(client, "SELECT * FROM vapp_tasks WHERE id = $1 AND status = 'running' AND claimed_by = $2 FOR UPDATE", [
        taskId,
        workerId,
      ]);
      if (row === null) return null;
      const task = vappTaskFromRow(row);
      const vappRow = await first<VAppRow>(client, "SELECT * FROM vapps WHERE id = $1 FOR UPDATE", [task.vappId]);
      if (vappRow === null) throw new Error(`vApp ${task.vappId} of task ${task.id} is missing`);
      const finish = decide(task, vappFromRow(vappRow));
      const t = vappTaskToRow(finish.task);
      await client.query("UPDATE vapp_tasks SET status = $1, ended_at = $2, failure = $3, claimed_by = NULL WHERE id = $4", [t.status, t.ended_at, t.failure, t.id]);
      const v = vappToRow(finish.vapp);
      await client.query("UPDATE vapps SET status = $1, deployed = $2, modified_at = $3 WHERE id = $4", [v.status, v.deployed, v.modified_at, v.id]);
      await announce(client, changeOf.taskFinished(taskId));
      return finish;
    });
  }
}
