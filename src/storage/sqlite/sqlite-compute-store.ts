import type Database from "better-sqlite3";
import { nodePoolNameTaken } from "../../compute/compute-errors.js";
import type { NodePoolRecord } from "../../compute/node-pools/node-pool-model.js";
import type { TaskRecord } from "../../compute/tasks/task-model.js";
import type { ComputeStore, PoolTaskStart, QueuedTasks, TaskFinish, TaskPage } from "../compute-store.js";
import { poolFromRow, poolParams, taskFromRow, taskParams } from "../rows.js";
import type { PoolRow, TaskRow } from "../rows.js";

// better-sqlite3 is synchronous, so each method runs to completion without interleaving with another call of this
// process; IMMEDIATE transactions also serialize writers of other processes on the same file.
export class SqliteComputeStore implements ComputeStore {
  private readonly stmt;

  constructor(private readonly db: Database.Database) {
    this.stmt = {
      insertPool: db.prepare(
        `INSERT INTO compute_node_pools (id, service_instance_id, cluster_id, name, compute_flavor, node_count, state,
           active_task_id, pending_name, created_at, modified_at)
         VALUES (@id, @service_instance_id, @cluster_id, @name, @compute_flavor, @node_count, @state, @active_task_id,
           @pending_name, @created_at, @modified_at)`,
      ),
      updatePool: db.prepare(
        `UPDATE compute_node_pools SET name = @name, node_count = @node_count, state = @state,
           active_task_id = @active_task_id, pending_name = @pending_name, modified_at = @modified_at WHERE id = @id`,
      ),
      deletePool: db.prepare("DELETE FROM compute_node_pools WHERE id = ?"),
      getPool: db.prepare("SELECT * FROM compute_node_pools WHERE id = ?"),
      listPools: db.prepare("SELECT * FROM compute_node_pools WHERE service_instance_id = ? AND cluster_id = ? ORDER BY seq"),
      nameHolder: db.prepare(
        `SELECT id FROM compute_node_pools WHERE cluster_id = @cluster_id AND id <> @id
           AND (name = @name OR pending_name = @name) LIMIT 1`,
      ),
      insertTask: db.prepare(
        `INSERT INTO compute_tasks (id, command, status, service_instance_id, cluster_id, node_pool_id, change, created_by,
           created_at, modified_at, failure, result, attempts)
         VALUES (@id, @command, @status, @service_instance_id, @cluster_id, @node_pool_id, @change, @created_by,
           @created_at, @modified_at, @failure, @result, @attempts)`,
      ),
      finishTask: db.prepare(
        `UPDATE compute_tasks SET status = @status, modified_at = @modified_at, failure = @failure, result = @result,
           claimed_by = NULL WHERE id = @id`,
      ),
      // Reads the partial index of unfinished tasks only.
      taskQueue: db.prepare(
        "SELECT status, COUNT(*) AS count, MIN(created_at) AS oldest FROM compute_tasks WHERE status IN ('PENDING', 'RUNNING') GROUP BY status",
      ),
      // Through the partial index of finished tasks (migration 9): a sweep that finds nothing reads one entry.
      pruneFinished: db.prepare(
        `DELETE FROM compute_tasks WHERE seq IN (
           SELECT seq FROM compute_tasks WHERE status IN ('SUCCEEDED', 'FAILED') AND modified_at < ? ORDER BY modified_at LIMIT ?)`,
      ),
      getTask: db.prepare("SELECT * FROM compute_tasks WHERE id = ?"),
      claimedTask: db.prepare("SELECT * FROM compute_tasks WHERE id = ? AND status = 'RUNNING' AND claimed_by = ?"),
      listTasks: db.prepare("SELECT * FROM compute_tasks WHERE service_instance_id = ? ORDER BY seq DESC LIMIT ? OFFSET ?"),
      listPoolTasks: db.prepare(
        "SELECT * FROM compute_tasks WHERE service_instance_id = ? AND node_pool_id = ? ORDER BY seq DESC LIMIT ? OFFSET ?",
      ),
      heartbeat: db.prepare(
        `INSERT INTO compute_workers (id, heartbeat_at) VALUES (?, ?)
         ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`,
      ),
      retireWorker: db.prepare("DELETE FROM compute_workers WHERE id = ?"),
      forgetWorkers: db.prepare("DELETE FROM compute_workers WHERE heartbeat_at < ?"),
      // One statement: picking the task and marking it ours cannot be split by another writer. Taking a task over
      // from a dead worker is not a change a caller sees, so modified_at moves only on PENDING -> RUNNING.
      claimTask: db.prepare(
        `UPDATE compute_tasks
         SET status = 'RUNNING', claimed_by = @worker, attempts = attempts + 1,
             modified_at = CASE WHEN status = 'PENDING' THEN @now ELSE modified_at END
         WHERE seq = (
           SELECT t.seq FROM compute_tasks t LEFT JOIN compute_workers w ON w.id = t.claimed_by
           WHERE t.status IN ('PENDING', 'RUNNING')
             AND (t.status = 'PENDING'
               OR (t.claimed_by IS NOT @worker AND (w.heartbeat_at IS NULL OR w.heartbeat_at < @stale_before)))
           ORDER BY t.seq LIMIT 1)
         RETURNING *`,
      ),
    };
  }

  private assertNameFree(clusterId: string, name: string, poolId: string): void {
    const holder = this.stmt.nameHolder.pluck().get({ cluster_id: clusterId, name, id: poolId }) as string | undefined;
    if (holder !== undefined) throw nodePoolNameTaken(clusterId, name, holder);
  }

  private readPool(id: string): NodePoolRecord | null {
    const row = this.stmt.getPool.get(id) as PoolRow | undefined;
    return row === undefined ? null : poolFromRow(row);
  }

  async getNodePool(id: string): Promise<NodePoolRecord | null> {
    return this.readPool(id);
  }

  async listNodePools(serviceInstanceId: string, clusterId: string): Promise<NodePoolRecord[]> {
    return (this.stmt.listPools.all(serviceInstanceId, clusterId) as PoolRow[]).map(poolFromRow);
  }

  async createNodePool(pool: NodePoolRecord, task: TaskRecord): Promise<void> {
    this.db
      .transaction(() => {
        this.assertNameFree(pool.clusterId, pool.name, pool.id);
        this.stmt.insertPool.run(poolParams(pool));
        this.stmt.insertTask.run(taskParams(task));
      })
      .immediate();
  }

  async startPoolTask(poolId: string, decide: (current: NodePoolRecord) => PoolTaskStart): Promise<PoolTaskStart | null> {
    return this.db
      .transaction(() => {
        const current = this.readPool(poolId);
        if (current === null) return null;
        const start = decide(current);
        if (start.pool.pendingName !== null) this.assertNameFree(current.clusterId, start.pool.pendingName, poolId);
        this.stmt.updatePool.run(poolParams(start.pool));
        this.stmt.insertTask.run(taskParams(start.task));
        return start;
      })
      .immediate();
  }

  async getTask(id: string): Promise<TaskRecord | null> {
    const row = this.stmt.getTask.get(id) as TaskRow | undefined;
    return row === undefined ? null : taskFromRow(row);
  }

  async listTasks(serviceInstanceId: string, nodePoolId: string | null, page: TaskPage): Promise<TaskRecord[]> {
    const rows =
      nodePoolId === null
        ? this.stmt.listTasks.all(serviceInstanceId, page.limit, page.offset)
        : this.stmt.listPoolTasks.all(serviceInstanceId, nodePoolId, page.limit, page.offset);
    return (rows as TaskRow[]).map(taskFromRow);
  }

  async heartbeat(workerId: string, now: number, forgetBefore: number): Promise<void> {
    this.db.transaction(() => {
      this.stmt.forgetWorkers.run(forgetBefore);
      this.stmt.heartbeat.run(workerId, now);
    })();
  }

  async retireWorker(workerId: string): Promise<void> {
    this.stmt.retireWorker.run(workerId);
  }

  // Forgets every worker: for a server that holds the data directory's lock, which proves them all dead
  // (sqlite-storage.ts), so that their unfinished tasks are taken over at once.
  retireEveryWorker(): void {
    this.db.exec("DELETE FROM compute_workers");
  }

  async taskQueue(): Promise<Record<"PENDING" | "RUNNING", QueuedTasks>> {
    const queue = { PENDING: { count: 0, oldestCreatedAt: null }, RUNNING: { count: 0, oldestCreatedAt: null } } as Record<"PENDING" | "RUNNING", QueuedTasks>;
    for (const row of this.stmt.taskQueue.all() as { status: "PENDING" | "RUNNING"; count: number; oldest: number }[]) {
      queue[row.status] = { count: row.count, oldestCreatedAt: row.oldest };
    }
    return queue;
  }

  // A finished task's modified_at is when it finished, and nothing else points at it: a pool names only its
  // unfinished task (activeTaskId), and a finish releases the worker's claim.
  async pruneFinishedTasks(before: number, limit: number): Promise<number> {
    return this.stmt.pruneFinished.run(before, limit).changes;
  }

  async claimTask(workerId: string, now: number, staleBefore: number): Promise<TaskRecord | null> {
    const row = this.stmt.claimTask.get({ worker: workerId, now, stale_before: staleBefore }) as TaskRow | undefined;
    return row === undefined ? null : taskFromRow(row);
  }

  async finishTask(
    taskId: string,
    workerId: string,
    decide: (task: TaskRecord, pool: NodePoolRecord | null) => TaskFinish,
  ): Promise<TaskFinish | null> {
    return this.db
      .transaction(() => {
        const row = this.stmt.claimedTask.get(taskId, workerId) as TaskRow | undefined;
        if (row === undefined) return null;
        const task = taskFromRow(row);
        const finish = decide(task, this.readPool(task.nodePoolId));
        this.stmt.finishTask.run(taskParams(finish.task));
        if (finish.pool === null) this.stmt.deletePool.run(task.nodePoolId);
        else this.stmt.updatePool.run(poolParams(finish.pool));
        return finish;
      })
      .immediate();
  }
}
