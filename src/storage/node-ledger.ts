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

export interface NodeLedger {
  get(nodePoolId: string): Promise<PlacedNodes | null>;
  // Atomically for the cluster: raises the pool's reservation to `nodes` if the other pools of the cluster leave
  // room within `capacity`; a reservation already at or above `nodes` is kept. On refusal, `free` is what the
  // other pools leave.
  reserve(clusterId: string, nodePoolId: string, nodes: number, capacity: number): Promise<Reservation>;
  setReady(nodePoolId: string, ready: number): Promise<void>;
  // The pool has exactly `nodes` nodes up and holds no more than that.
  settle(clusterId: string, nodePoolId: string, nodes: number): Promise<void>;
  release(nodePoolId: string): Promise<void>;
}
