import type Database from "better-sqlite3";
import { ClaimLostError } from "../node-ledger.js";
import type { NodeLedger, PlacedNodes, Reservation, TaskClaim } from "../node-ledger.js";
import { placedFromRow, placedParams } from "../rows.js";
import type { PlacedRow } from "../rows.js";

// The capacity check and the reservation run in one IMMEDIATE transaction: no other writer can place nodes in
// between, so the pools of a cluster never hold more than its capacity.
export class SqliteNodeLedger implements NodeLedger {
  private readonly stmt;

  constructor(private readonly db: Database.Database) {
    this.stmt = {
      get: db.prepare("SELECT * FROM compute_simulated_nodes WHERE node_pool_id = ?"),
      reservedByOthers: db.prepare(
        "SELECT COALESCE(SUM(reserved), 0) FROM compute_simulated_nodes WHERE cluster_id = ? AND node_pool_id <> ?",
      ),
      upsert: db.prepare(
        `INSERT INTO compute_simulated_nodes (node_pool_id, cluster_id, reserved, ready) VALUES (@node_pool_id, @cluster_id, @reserved, @ready)
         ON CONFLICT (node_pool_id) DO UPDATE SET reserved = excluded.reserved, ready = excluded.ready`,
      ),
      setReady: db.prepare("UPDATE compute_simulated_nodes SET ready = ? WHERE node_pool_id = ?"),
      release: db.prepare("DELETE FROM compute_simulated_nodes WHERE node_pool_id = ?"),
      claimHeld: db.prepare("SELECT 1 FROM compute_tasks WHERE id = ? AND status = 'RUNNING' AND claimed_by = ?"),
    };
  }

  // Runs `write` in one transaction with the check that the claim is still held (TaskClaim).
  private claimed<T>(claim: TaskClaim, write: () => T): T {
    return this.db
      .transaction((): T => {
        if (this.stmt.claimHeld.get(claim.taskId, claim.workerId) === undefined) throw new ClaimLostError(claim);
        return write();
      })
      .immediate();
  }

  private read(nodePoolId: string): PlacedNodes | null {
    const row = this.stmt.get.get(nodePoolId) as PlacedRow | undefined;
    return row === undefined ? null : placedFromRow(row);
  }

  async get(nodePoolId: string): Promise<PlacedNodes | null> {
    return this.read(nodePoolId);
  }

  async reserve(claim: TaskClaim, clusterId: string, nodePoolId: string, nodes: number, capacity: number): Promise<Reservation> {
    return this.claimed(claim, (): Reservation => {
      const current = this.read(nodePoolId);
      if (current !== null && current.reserved >= nodes) return { ok: true };
      const others = this.stmt.reservedByOthers.pluck().get(clusterId, nodePoolId) as number;
      if (others + nodes > capacity) return { ok: false, free: Math.max(0, capacity - others) };
      this.stmt.upsert.run(placedParams({ nodePoolId, clusterId, reserved: nodes, ready: current?.ready ?? 0 }));
      return { ok: true };
    });
  }

  async setReady(claim: TaskClaim, nodePoolId: string, ready: number): Promise<void> {
    this.claimed(claim, () => this.stmt.setReady.run(ready, nodePoolId));
  }

  async settle(claim: TaskClaim, clusterId: string, nodePoolId: string, nodes: number): Promise<void> {
    this.claimed(claim, () => this.stmt.upsert.run(placedParams({ nodePoolId, clusterId, reserved: nodes, ready: nodes })));
  }

  async release(claim: TaskClaim, nodePoolId: string): Promise<void> {
    this.claimed(claim, () => this.stmt.release.run(nodePoolId));
  }
}
