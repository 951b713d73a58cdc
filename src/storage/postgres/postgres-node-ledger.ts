import type pg from "pg";
import { ClaimLostError } from "../node-ledger.js";
import type { NodeLedger, PlacedNodes, Reservation, TaskClaim } from "../node-ledger.js";
import { placedFromRow, placedParams } from "../rows.js";
import type { PlacedRow } from "../rows.js";
import { first, insert, lockKinds, lockName, transaction } from "./sql.js";
import type { Queryable } from "./sql.js";

const UPSERT_SUFFIX = "ON CONFLICT (node_pool_id) DO UPDATE SET reserved = excluded.reserved, ready = excluded.ready";

// The simulated provider's inventory in PostgreSQL. A reservation holds a transaction-scoped advisory lock on its
// cluster while it adds up the other pools' reservations, so servers reserving in one cluster at once never place
// more nodes than its capacity.
export class PostgresNodeLedger implements NodeLedger {
  constructor(private readonly pool: pg.Pool) {}

  private async read(db: Queryable, nodePoolId: string): Promise<PlacedNodes | null> {
    const row = await first<PlacedRow>(db, "SELECT * FROM compute_simulated_nodes WHERE node_pool_id = $1", [nodePoolId]);
    return row === null ? null : placedFromRow(row);
  }

  private async upsert(db: Queryable, placed: PlacedNodes): Promise<void> {
    const q = insert("compute_simulated_nodes", placedParams(placed), UPSERT_SUFFIX);
    await db.query(q.text, q.values);
  }

  get(nodePoolId: string): Promise<PlacedNodes | null> {
    return this.read(this.pool, nodePoolId);
  }

  // Runs `write` in one transaction with the check that the claim is still held (TaskClaim). The task's row is held
  // FOR SHARE until the write commits, so a claim by another worker waits for it, and is seen by every write after.
  private claimed<T>(claim: TaskClaim, write: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return transaction(this.pool, async (client) => {
      const held = await first<{ id: string }>(
        client,
        "SELECT id FROM compute_tasks WHERE id = $1 AND status = 'RUNNING' AND claimed_by = $2 FOR SHARE",
        [claim.taskId, claim.workerId],
      );
      if (held === null) throw new ClaimLostError(claim);
      return write(client);
    });
  }

  async reserve(claim: TaskClaim, clusterId: string, nodePoolId: string, nodes: number, capacity: number): Promise<Reservation> {
    return this.claimed(claim, async (client): Promise<Reservation> => {
      await lockName(client, lockKinds.clusterCapacity, clusterId);
      const current = await this.read(client, nodePoolId);
      if (current !== null && current.reserved >= nodes) return { ok: true };
      const others = (await first<{ n: number }>(
        client,
        "SELECT COALESCE(SUM(reserved), 0)::bigint AS n FROM compute_simulated_nodes WHERE cluster_id = $1 AND node_pool_id <> $2",
        [clusterId, nodePoolId],
      ))!.n;
      if (others + nodes > capacity) return { ok: false, free: Math.max(0, capacity - others) };
      await this.upsert(client, { nodePoolId, clusterId, reserved: nodes, ready: current?.ready ?? 0 });
      return { ok: true };
    });
  }

  async setReady(claim: TaskClaim, nodePoolId: string, ready: number): Promise<void> {
    await this.claimed(claim, (client) => client.query("UPDATE compute_simulated_nodes SET ready = $1 WHERE node_pool_id = $2", [ready, nodePoolId]));
  }

  async settle(claim: TaskClaim, clusterId: string, nodePoolId: string, nodes: number): Promise<void> {
    await this.claimed(claim, (client) => this.upsert(client, { nodePoolId, clusterId, reserved: nodes, ready: nodes }));
  }

  async release(claim: TaskClaim, nodePoolId: string): Promise<void> {
    await this.claimed(claim, (client) => client.query("DELETE FROM compute_simulated_nodes WHERE node_pool_id = $1", [nodePoolId]));
  }
}
