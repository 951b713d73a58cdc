// The node pool domain model: plain data, no protocol types. Times are epoch milliseconds.

export const nodePoolStates = ["PROVISIONING", "RUNNING", "RECONCILING", "DELETING", "ERROR"] as const;
export type NodePoolState = (typeof nodePoolStates)[number];

export interface NodePoolRecord {
  id: string;
  serviceInstanceId: string;
  clusterId: string;
  // The name and count the pool has now. An update changes them only when its task succeeds.
  name: string;
  computeFlavor: string;
  count: number;
  state: NodePoolState;
  // The one unfinished task of the pool, if any: while it is set, every other change is refused.
  activeTaskId: string | null;
  // The name an unfinished update renames the pool to. It is held like a name in use, so two pools of a cluster
  // can never end up with the same name.
  pendingName: string | null;
  createdAt: number;
  modifiedAt: number;
}

// What the provider is asked to make true for one pool.
export interface NodePoolSpec {
  serviceInstanceId: string;
  clusterId: string;
  nodePoolId: string;
  name: string;
  computeFlavor: string;
  count: number;
}
