import { setTimeout as sleep } from "node:timers/promises";
import type { Catalog } from "../catalog/catalog.js";
import { findCluster, findFlavor, findServiceInstance } from "../catalog/catalog.js";
import { clusterNotFound, computeFlavorUnavailable, nodeCapacityExhausted } from "../compute-errors.js";
import type { NodeLedger, TaskClaim } from "../../storage/node-ledger.js";
import type { NodePoolSpec } from "./node-pool-model.js";
import type { NodePoolProvider } from "./provider.js";

export interface SimulatedProviderSettings {
  // Time to bring one node up or down; 0 makes every change instant.
  delayPerNodeMs: number;
}

// The built-in provider: nodes are rows of the node ledger, capacity comes from the catalog, and each node takes
// `delayPerNodeMs` to appear or go. It fails the way a platform does: a flavor the catalog marks unavailable
// cannot get new nodes (UNAVAILABLE, retry later), and a cluster cannot hold more nodes than its capacity
// (RESOURCE_EXHAUSTED with QuotaFailure). Progress is written node by node, so a resumed call carries on from
// the nodes already up.
export class SimulatedProvider implements NodePoolProvider {
  constructor(
    private readonly ledger: NodeLedger,
    private readonly catalog: Catalog,
    private readonly settings: SimulatedProviderSettings,
  ) {}

  async apply(spec: NodePoolSpec, claim: TaskClaim, signal: AbortSignal): Promise<void> {
    const instance = findServiceInstance(this.catalog, spec.serviceInstanceId);
    const cluster = instance === undefined ? undefined : findCluster(instance, spec.clusterId);
    if (cluster === undefined) throw clusterNotFound(spec.serviceInstanceId, spec.clusterId);
    const placed = await this.ledger.get(spec.nodePoolId);
    if (spec.count > (placed?.reserved ?? 0)) {
      // Only new nodes need the flavor and free capacity; renaming or shrinking a pool always works.
      if (findFlavor(this.catalog, spec.computeFlavor)?.available !== true) throw computeFlavorUnavailable(spec.computeFlavor);
      const reservation = await this.ledger.reserve(claim, cluster.id, spec.nodePoolId, spec.count, cluster.capacity);
      if (!reservation.ok) {
        throw nodeCapacityExhausted({
          clusterId: cluster.id,
          capacity: cluster.capacity,
          free: reservation.free,
          nodePoolId: spec.nodePoolId,
          requested: spec.count,
        });
      }
    }
    await this.walk(claim, spec.nodePoolId, placed?.ready ?? 0, spec.count, signal);
    await this.ledger.settle(claim, cluster.id, spec.nodePoolId, spec.count);
  }

  async remove(spec: NodePoolSpec, claim: TaskClaim, signal: AbortSignal): Promise<void> {
    const placed = await this.ledger.get(spec.nodePoolId);
    if (placed !== null) await this.walk(claim, spec.nodePoolId, placed.ready, 0, signal);
    await this.ledger.release(claim, spec.nodePoolId);
  }

  // Brings the pool's ready nodes from `from` to `to`, one node per delay.
  private async walk(claim: TaskClaim, nodePoolId: string, from: number, to: number, signal: AbortSignal): Promise<void> {
    if (this.settings.delayPerNodeMs === 0) return;
    const step = to > from ? 1 : -1;
    for (let ready = from; ready !== to; ) {
      await sleep(this.settings.delayPerNodeMs, undefined, { signal });
      ready += step;
      await this.ledger.setReady(claim, nodePoolId, ready);
    }
  }
}
