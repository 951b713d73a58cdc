import type pg from "pg";
import { nodePoolNameTaken } from "../../compute/compute-errors.js";
import type { NodePoolRecord } from "../../compute/node-pools/node-pool-model.js";
import type { TaskRecord } from "../../compute/tasks/task-model.js";
import type { ComputeStore, PoolTaskStart, QueuedTasks, TaskFinish, TaskPage } from "../compute-store.js";
import { poolFromRow, poolParams, taskFromRow, taskParams } from "../rows.js";
import type { PoolRow, TaskRow } from "../rows.js";
import { announce, changeOf, first, insert, lockKinds, lockName, noRowHas, rows, transaction } from "./sql.js";
import { claimOldest } from "./task-claim.js";
import type { ClaimQuery } from "./task-claim.js";

// Which tasks a worker ($1) may claim: PENDING ones, and RUNNING ones of another worker whose heartbeat is older than
// $2 (or gone).
const CLAIMABLE = `t.status IN ('PENDING', 'RUNNING')
  AND (t.status = 'PENDING' OR (t.claimed_by IS DISTINCT FROM $1 AND (w.heartbeat_at IS NULL OR w.heartbeat_at < $2)))`;

// A task taken over from a dead worker is not a change a caller sees, so modified_at moves only on PENDING -> RUNNING.
const CLAIM: ClaimQuery = {
  table: "compute_tasks",
  claimable: CLAIMABLE,
  update: (seq, workerId, now) => ({
    text: `UPDATE compute_tasks SET status = 'RUNNING', claimed_by = $1, attempts = attempts + 1,
             modified_at = CASE WHEN status = 'PENDING' THEN $2 ELSE modified_at END
           WHERE seq = $3 RETURNING *`,
    values: [workerId, now, seq],
  }),
};

// Node pools and tasks in PostgreSQL, shared by every server on the database. A task is claimed by one worker with
// FOR UPDATE SKIP LOCKED (concurrent claimers pass over a row another is taking instead of waiting for it); the claim
// is a lease that lasts as long as its worker's heartbeat is fresh, and a task whose worker stopped beating is
// claimed again by another (docs/storage.md). Storing a task and finishing one are announced, so that idle workers
// and waiting WaitTask calls on every server react at once.
export class PostgresComputeStore implements ComputeStore {
  constructor(private readonly pool: pg.Pool) {}

  private async assertNameFree(client: pg.PoolClient, clusterId: string, name: string, poolId: string): Promise<void> {
    await lockName(client, lockKinds.poolName, JSON.stringify([clusterId, name]));
    const holder = await first<{ id: string }>(
      client,
      "SELECT id FROM compute_node_pools WHERE cluster_id = $1 AND id <> $2 AND (name = $3 OR pending_name = $3) LIMIT 1",
      [clusterId, poolId, name],
    );
    if (holder !== null) throw nodePoolNameTaken(clusterId, name, holder.id);
  }

  private async updatePool(client: pg.PoolClient, pool: NodePoolRecord): Promise<void> {
    const p = poolParams(pool);
    await client.query(
      `UPDATE compute_node_pools SET name = $2, node_count = $3, state = $4, active_task_id = $5, pending_name = $6,
         modified_at = $7 WHERE id = $1`,
      [p.id, p.name, p.node_count, p.state, p.active_task_id, p.pending_name, p.modified_at],
    );
  }

  private async insertTask(client: pg.PoolClient, task: TaskRecord): Promise<void> {
    const q = insert("compute_tasks", taskParams(task));
    await client.query(q.text, q.values);
    await announce(client, changeOf.taskStored());
  }

  async getNodePool(id: string): Promise<NodePoolRecord | null> {
    if (noRowHas(id)) return null;
    const row = await first<PoolRow>(this.pool, "SELECT * FROM compute_node_pools WHERE id = $1", [id]);
    return row === null ? null : poolFromRow(row);
  }

  async listNodePools(serviceInstanceId: string, clusterId: string): Promise<NodePoolRecord[]> {
    if (noRowHas(serviceInstanceId) || noRowHas(clusterId)) return [];
    const found = await rows<PoolRow>(
      this.pool,
      "SELECT * FROM compute_node_pools WHERE service_instance_id = $1 AND cluster_id = $2 ORDER BY seq",
      [serviceInstanceId, clusterId],
    );
    return found.map(poolFromRow);
  }

  async createNodePool(pool: NodePoolRecord, task: TaskRecord): Promise<void> {
    await transaction(this.pool, async (client) => {
      await this.assertNameFree(client, pool.clusterId, pool.name, pool.id);
      const q = insert("compute_node_pools", poolParams(pool));
      await client.query(q.text, q.values);
      await this.insertTask(client, task);
    });
  }

  async startPoolTask(poolId: string, decide: (current: NodePoolRecord) => PoolTaskStart): Promise<PoolTaskStart | null> {
    if (noRowHas(poolId)) return null;
    return transaction(this.pool, async (client) => {
      const row = await first<PoolRow>(client, "SELECT * FROM compute_node_pools WHERE id = $1 FOR UPDATE", [poolId]);
      if (row === null) return null;
      const current = poolFromRow(row);
      const start = decide(current);
      if (start.pool.pendingName !== null) await this.assertNameFree(client, current.clusterId, start.pool.pendingName, poolId);
      await this.updatePool(client, start.pool);
      await this.insertTask(client, start.task);
      return start;
    });
  }

  async taskQueue(): Promise<Record<"PENDING" | "RUNNING", QueuedTasks>> {
    const queue: Record<"PENDING" | "RUNNING", QueuedTasks> = { PENDING: { count: 0, oldestCreatedAt: null }, RUNNING: { count: 0, oldestCreatedAt: null } };
    const found = await rows<{ status: "PENDING" | "RUNNING"; count: number; oldest: number }>(
      this.pool,
      "SELECT status, COUNT(*) AS count, MIN(created_at) AS oldest FROM compute_tasks WHERE status IN ('PENDING', 'RUNNING') GROUP BY status",
    );
    for (const row of found) queue[row.status] = { count: row.count, oldestCreatedAt: row.oldest };
    return queue;
  }

  async getTask(id: string): Promise<TaskRecord | null> {
    if (noRowHas(id)) return null;
    const row = await first<TaskRow>(this.pool, "SELECT * FROM compute_tasks WHERE id = $1", [id]);
    return row === null ? null : taskFromRow(row);
  }

  async listTasks(serviceInstanceId: string, nodePoolId: string | null, page: TaskPage): Promise<TaskRecord[]> {
    if (noRowHas(serviceInstanceId) || (nodePoolId !== null && noRowHas(nodePoolId))) return [];
    const found =
      nodePoolId === null
        ? await rows<TaskRow>(this.pool, "SELECT * FROM compute_tasks WHERE service_instance_id = $1 ORDER BY seq DESC LIMIT $2 OFFSET $3", [
            serviceInstanceId,
            page.limit,
            page.offset,
          ])
        : await rows<TaskRow>(
            this.pool,
            "SELECT * FROM compute_tasks WHERE service_instance_id = $1 AND node_pool_id = $2 ORDER BY seq DESC LIMIT $3 OFFSET $4",
            [serviceInstanceId, nodePoolId, page.limit, page.offset],
          );
    return found.map(taskFromRow);
  }

  async heartbeat(workerId: string, now: number, forgetBefore: number): Promise<void> {
    await transaction(this.pool, async (client) => {
      await client.query("DELETE FROM compute_workers WHERE heartbeat_at < $1", [forgetBefore]);
      await client.query(
        "INSERT INTO compute_workers (id, heartbeat_at) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
        [workerId, now],
      );
    });
  }

  async retireWorker(workerId: string): Promise<void> {
    await this.pool.query("DELETE FROM compute_workers WHERE id = $1", [workerId]);
    // Its unfinished tasks may be taken at once.
    await announce(this.pool, changeOf.taskStored());
  }

  // As on the embedded store (sqlite-compute-store.ts). Every server sweeps; two deleting the same rows at once delete
  // each once, and neither waits on a claim or a finish, which lock only unfinished tasks.
  async pruneFinishedTasks(before: number, limit: number): Promise<number> {
    const result = await this.pool.query(
      `DELETE FROM compute_tasks WHERE seq IN (
         SELECT seq FROM compute_tasks WHERE status IN ('SUCCEEDED', 'FAILED') AND modified_at < $1 ORDER BY modified_at LIMIT $2)`,
      [before, limit],
    );
    return result.rowCount ?? 0;
  }

  async claimTask(workerId: string, now: number, staleBefore: number): Promise<TaskRecord | null> {
    const row = await claimOldest<TaskRow>(this.pool, CLAIM, workerId, now, staleBefore);
    return row === null ? null : taskFromRow(row);
  }

  async finishTask(
    taskId: string,
    workerId: string,
    decide: (task: TaskRecord, pool: NodePoolRecord | null) => TaskFinish,
  ): Promise<TaskFinish | null> {
    return transaction(this.pool, async (client) => {
      const row = await first<TaskRow>(
        client,
        "SELECT * FROM compute_tasks WHERE id = $1 AND status = 'RUNNING' AND claimed_by = $2 FOR UPDATE",
        [taskId, workerId],
      );
      if (row === null) return null;
      const task = taskFromRow(row);
      const poolRow = await first<PoolRow>(client, "SELECT * FROM compute_node_pools WHERE id = $1 FOR UPDATE", [task.nodePoolId]);
      const finish = decide(task, poolRow === null ? null : poolFromRow(poolRow));
      const t = taskParams(finish.task);
      await client.query("UPDATE compute_tasks SET status = $2, modified_at = $3, failure = $4, result = $5, claimed_by = NULL WHERE id = $1", [
        t.id,
        t.status,
        t.modified_at,
        t.failure,
        t.result,
      ]);
      if (finish.pool === null) await client.query("DELETE FROM compute_node_pools WHERE id = $1", [task.nodePoolId]);
      else await this.updatePool(client, finish.pool);
      await announce(client, changeOf.taskFinished(taskId));
      return finish;
    });
  }
}
