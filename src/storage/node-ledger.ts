// The nodes the built-in simulated provider has placed in each cluster: its stand-in for a real platform's
// inventory, kept in the same database so that it survives a crash together with the tasks that changed it.

export interface PlacedNodes {
  clusterId: string;
  nodePoolId: string;
  // Nodes of the cluster's capacity held for the pool.
  reserved: number;
  // Nodes of the pool that are up.
  ready: number;
}

export type Reservation = { ok: true } | { ok: false; free: number };

// The node pool task a write is made for, and the worker that claimed it. Every write checks in its own transaction
// that the worker still holds the task (RUNNING, claimed by it), and changes nothing otherwise: a worker that stalled
// past its lease (a frozen VM, a stopped process) while another server resumed the task kept writing when it woke,
// and recreated the nodes of a pool the other server had since deleted, holding their capacity for good (a probe,
// 2026-11-28).
export interface TaskClaim {
  taskId: string;
  workerId: string;
}

// The claim was lost: another worker runs the task now. The worker that gets it stops the task's run.
export class ClaimLostError extends Error {
  constructor(claim: TaskClaim) {
    super(`worker ${claim.workerId} no longer holds task ${claim.taskId}`);
  }
}

export interface NodeLedger {
  get(nodePoolId: string): Promise<PlacedNodes | null>;
  // Atomically for the cluster: raises the pool's reservation to `nodes` if the other pools of the cluster leave
  // room within `capacity`; a reservation already at or above `nodes` is kept. On refusal, `free` is what the
  // other pools leave.
  reserve(claim: TaskClaim, clusterId: string, nodePoolId: string, nodes: number, capacity: number): Promise<Reservation>;
  setReady(claim: TaskClaim, nodePoolId: string, ready: number): Promise<void>;
  // The pool has exactly `nodes` nodes up and holds no more than that.
  settle(claim: TaskClaim, clusterId: string, nodePoolId: string, nodes: number): Promise<void>;
  release(claim: TaskClaim, nodePoolId: string): Promise<void>;
}
