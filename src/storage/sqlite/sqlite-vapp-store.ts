import type Database from "better-sqlite3";
import { vappNameTaken } from "../../compute/vapps/vapp-errors.js";
import type { VAppRecord, VAppTaskRecord } from "../../compute/vapps/vapp-model.js";
import type { VAppStore, VAppTaskFinish } from "../vapp-store.js";
import { vappFromRow, vappTaskFromRow, vappTaskToRow, vappToRow } from "../vapp-rows.js";
import type { VAppRow, VAppTaskRow } from "../vapp-rows.js";

// vApps and their tasks in the embedded database. Workers' heartbeats are SqliteComputeStore's (compute_workers),
// read by the claim. Synchronous like every better-sqlite3 store; IMMEDIATE
// transactions serialize writers of other processes on the same file.
export class SqliteVAppStore implements VAppStore {
  private readonly stmt;

  constructor(private readonly db: Database.Database) {
    this.stmt = {
      insertVApp: db.prepare(
        `INSERT INTO vapps (id, name, description, service_instance_id, template_id, network_name, deploy, power_on, status,
           deployed, created_by, created_at, modified_at, task_id)
         VALUES (@id, @name, @description, @service_instance_id, @template_id, @network_name, @deploy, @power_on, @status,
           @deployed, @created_by, @created_at, @modified_at, @task_id)`,
      ),
      updateVApp: db.prepare("UPDATE vapps SET status = @status, deployed = @deployed, modified_at = @modified_at WHERE id = @id"),
      getVApp: db.prepare("SELECT * FROM vapps WHERE id = ?"),
      nameHolder: db.prepare("SELECT id FROM vapps WHERE service_instance_id = ? AND name = ?"),
      insertTask: db.prepare(
        `INSERT INTO vapp_tasks (id, command, status, vapp_id, vapp_name, service_instance_id, created_by, created_at, ended_at,
           failure, attempts)
         VALUES (@id, @command, @status, @vapp_id, @vapp_name, @service_instance_id, @created_by, @created_at, @ended_at,
           @failure, @attempts)`,
      ),
      finishTask: db.prepare(
        "UPDATE vapp_tasks SET status = @status, ended_at = @ended_at, failure = @failure, claimed_by = NULL WHERE id = @id",
      ),
      // Through the partial index of finished tasks (migration 9): a sweep that finds nothing reads one entry.
      pruneFinished: db.prepare(
        `DELETE FROM vapp_tasks WHERE seq IN (
           SELECT seq FROM vapp_tasks WHERE status IN ('success', 'error') AND ended_at < ? ORDER BY ended_at LIMIT ?)`,
      ),
      getTask: db.prepare("SELECT * FROM vapp_tasks WHERE id = ?"),
      claimedTask: db.prepare("SELECT * FROM vapp_tasks WHERE id = ? AND status = 'running' AND claimed_by = ?"),
      // As the node pool queue's claim (sqlite-compute-store.ts), one statement picks the task and marks it ours. A
      // vApp task is stored running (vapp-manager.ts): unclaimed, or claimed by a worker whose heartbeat stopped.
      claimTask: db.prepare(
        `UPDATE vapp_tasks
         SET claimed_by = @worker, attempts = attempts + 1
         WHERE seq = (
           SELECT t.seq FROM vapp_tasks t LEFT JOIN compute_workers w ON w.id = t.claimed_by
           WHERE t.status = 'running'
             AND (t.claimed_by IS NULL
               OR (t.claimed_by IS NOT @worker AND (w.heartbeat_at IS NULL OR w.heartbeat_at < @stale_before)))
           ORDER BY t.seq LIMIT 1)
         RETURNING *`,
      ),
    };
  }

  async createVApp(vapp: VAppRecord, task: VAppTaskRecord): Promise<void> {
    this.db
      .transaction(() => {
        const holder = this.stmt.nameHolder.pluck().get(vapp.serviceInstanceId, vapp.name) as string | undefined;
        if (holder !== undefined) throw vappNameTaken(vapp.serviceInstanceId, vapp.name, holder);
        this.stmt.insertVApp.run(vappToRow(vapp));
        this.stmt.insertTask.run(vappTaskToRow(task));
      })
      .immediate();
  }

  async getVApp(id: string): Promise<VAppRecord | null> {
    const row = this.stmt.getVApp.get(id) as VAppRow | undefined;
    return row === undefined ? null : vappFromRow(row);
  }

  async getVAppTask(id: string): Promise<VAppTaskRecord | null> {
    const row = this.stmt.getTask.get(id) as VAppTaskRow | undefined;
    return row === undefined ? null : vappTaskFromRow(row);
  }

  async claimTask(workerId: string, _now: number, staleBefore: number): Promise<VAppTaskRecord | null> {
    const row = this.stmt.claimTask.get({ worker: workerId, stale_before: staleBefore }) as VAppTaskRow | undefined;
    return row === undefined ? null : vappTaskFromRow(row);
  }

  // The vApp keeps the id of its creation task (task_id) after the task is deleted; VAppManager.get reads a missing
  // task as a finished one.
  async pruneFinishedTasks(before: number, limit: number): Promise<number> {
    return this.stmt.pruneFinished.run(before, limit).changes;
  }

  async finishVAppTask(
    taskId: string,
    workerId: string,
    decide: (task: VAppTaskRecord, vapp: VAppRecord) => VAppTaskFinish,
  ): Promise<VAppTaskFinish | null> {
    return this.db
      .transaction(() => {
        const row = this.stmt.claimedTask.get(taskId, workerId) as VAppTaskRow | undefined;
        if (row === undefined) return null;
        const task = vappTaskFromRow(row);
        const vappRow = this.stmt.getVApp.get(task.vappId) as VAppRow | undefined;
        if (vappRow === undefined) throw new Error(`vApp ${task.vappId} of task ${task.id} is missing`);
        const finish = decide(task, vappFromRow(vappRow));
        this.stmt.finishTask.run(vappTaskToRow(finish.task));
        this.stmt.updateVApp.run(vappToRow(finish.vapp));
        return finish;
      })
      .immediate();
  }
}
