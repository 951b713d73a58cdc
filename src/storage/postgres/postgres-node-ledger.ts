import type pg from "pg";
import type { NodeLedger, PlacedNodes, Reservation } from "../node-ledger.js";
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

  async reserve(clusterId: string, nodePoolId: string, nodes: number, capacity: number): Promise<Reservation> {
    return transaction(this.pool, async (client): Promise<Reservation> => {
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

  async setReady(nodePoolId: string, ready: number): Promise<void> {
    await this.pool.query("UPDATE compute_simulated_nodes SET ready = $1 WHERE node_pool_id = $2", [ready, nodePoolId]);
  }

  async settle(clusterId: string, nodePoolId: string, nodes: number): Promise<void> {
    await this.upsert(this.pool, { nodePoolId, clusterId, reserved: nodes, ready: nodes });
  }

  async release(nodePoolId: string): Promise<void> {
    await this.pool.query("DELETE FROM compute_simulated_nodes WHERE node_pool_id = $1", [nodePoolId]);
  }
}
