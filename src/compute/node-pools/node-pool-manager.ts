import { randomUUID } from "node:crypto";
import type { Clock } from "../../shared/clock.js";
import type { ComputeStore } from "../../storage/compute-store.js";
import type { Catalog, Cluster, ServiceInstance } from "../catalog/catalog.js";
import { findCluster, findServiceInstance } from "../catalog/catalog.js";
import { clusterNotFound, nodePoolBusy, nodePoolNotFound, serviceInstanceNotFound } from "../compute-errors.js";
import type { NodePoolChange, TaskCommand, TaskRecord } from "../tasks/task-model.js";
import { Violations } from "../violations.js";
import type { NodePoolRecord } from "./node-pool-model.js";
import { checkCount, checkFlavor, checkName } from "./node-pool-rules.js";

export interface CreateNodePoolInput {
  serviceInstanceId: string;
  clusterId: string;
  computeFlavor: string;
  name: string;
  // Undefined when the caller gave none: 0 nodes.
  count: number | undefined;
  createdBy: string;
}

export interface UpdateNodePoolInput {
  serviceInstanceId: string;
  nodePoolId: string;
  // "" keeps the name.
  name: string;
  // Undefined keeps the count.
  count: number | undefined;
  createdBy: string;
}

export interface DeleteNodePoolInput {
  serviceInstanceId: string;
  nodePoolId: string;
  createdBy: string;
}

// The node pool domain: every synchronous rule of CONTRACT section 6 lives here. A change is checked completely,
// then stored together with its task in one write; the work itself is done later by the task worker.
export class NodePoolManager {
  constructor(
    private readonly store: ComputeStore,
    private readonly catalog: Catalog,
    private readonly clock: Clock,
    // Tells the worker that a task is waiting.
    private readonly onTaskCreated: () => void,
  ) {}

  private instance(serviceInstanceId: string): ServiceInstance {
    const instance = findServiceInstance(this.catalog, serviceInstanceId);
    if (instance === undefined) throw serviceInstanceNotFound(serviceInstanceId);
    return instance;
  }

  private cluster(serviceInstanceId: string, clusterId: string): Cluster {
    const cluster = findCluster(this.instance(serviceInstanceId), clusterId);
    if (cluster === undefined) throw clusterNotFound(serviceInstanceId, clusterId);
    return cluster;
  }

  // Without throwing: for field checks that need the cluster when there is one.
  private lookupCluster(serviceInstanceId: string, clusterId: string): Cluster | undefined {
    const instance = findServiceInstance(this.catalog, serviceInstanceId);
    return instance === undefined ? undefined : findCluster(instance, clusterId);
  }

  async list(serviceInstanceId: string, clusterId: string): Promise<NodePoolRecord[]> {
    const v = new Violations();
    v.requiredId("serviceInstanceId", serviceInstanceId);
    v.requiredId("clusterId", clusterId);
    v.throwIfAny();
    this.cluster(serviceInstanceId, clusterId);
    return this.store.listNodePools(serviceInstanceId, clusterId);
  }

  async get(serviceInstanceId: string, nodePoolId: string): Promise<NodePoolRecord> {
    const v = new Violations();
    v.requiredId("serviceInstanceId", serviceInstanceId);
    v.requiredId("nodePoolId", nodePoolId);
    v.throwIfAny();
    return this.existing(serviceInstanceId, nodePoolId);
  }

  private async existing(serviceInstanceId: string, nodePoolId: string): Promise<NodePoolRecord> {
    this.instance(serviceInstanceId);
    const pool = await this.store.getNodePool(nodePoolId);
    // A pool of another service instance is as unknown here as one that never existed.
    if (pool === null || pool.serviceInstanceId !== serviceInstanceId) throw nodePoolNotFound(serviceInstanceId, nodePoolId);
    return pool;
  }

  async create(input: CreateNodePoolInput): Promise<TaskRecord> {
    const count = input.count ?? 0;
    const v = new Violations();
    v.requiredId("serviceInstanceId", input.serviceInstanceId);
    v.requiredId("clusterId", input.clusterId);
    checkFlavor(v, "nodeConfig.computeFlavor", input.computeFlavor, this.catalog);
    checkName(v, "nodePoolName", input.name);
    checkCount(v, "scalePolicy.fixedScale.count", count, this.lookupCluster(input.serviceInstanceId, input.clusterId)?.maxPoolSize ?? null);
    v.throwIfAny();
    this.cluster(input.serviceInstanceId, input.clusterId);
    const now = this.clock.now();
    const pool: NodePoolRecord = {
      id: randomUUID(),
      serviceInstanceId: input.serviceInstanceId,
      clusterId: input.clusterId,
      name: input.name,
      computeFlavor: input.computeFlavor,
      count,
      state: "PROVISIONING",
      activeTaskId: null,
      pendingName: null,
      createdAt: now,
      modifiedAt: now,
    };
    const task = newTask("CreateNodePool", pool, { name: null, count: null, stateIfFailed: "ERROR" }, input.createdBy, now);
    await this.store.createNodePool({ ...pool, activeTaskId: task.id }, task);
    this.onTaskCreated();
    return task;
  }

  async update(input: UpdateNodePoolInput): Promise<TaskRecord> {
    const v = new Violations();
    v.requiredId("serviceInstanceId", input.serviceInstanceId);
    v.requiredId("nodePoolId", input.nodePoolId);
    if (input.name === "" && input.count === undefined) {
      v.add("nodePoolName", "nothing to update: give nodePoolName, scalePolicy.fixedScale.count or both");
    }
    if (input.name !== "") checkName(v, "nodePoolName", input.name);
    if (input.count !== undefined && input.count < 0) checkCount(v, "scalePolicy.fixedScale.count", input.count, null);
    v.throwIfAny();
    const pool = await this.existing(input.serviceInstanceId, input.nodePoolId);
    if (input.count !== undefined) {
      const limits = new Violations();
      checkCount(limits, "scalePolicy.fixedScale.count", input.count, this.cluster(pool.serviceInstanceId, pool.clusterId).maxPoolSize);
      limits.throwIfAny();
    }
    return this.startTask(input.serviceInstanceId, input.nodePoolId, "UpdateNodePool", input.createdBy, (current) => {
      const name = input.name === "" || input.name === current.name ? null : input.name;
      return {
        change: { name, count: input.count ?? null, stateIfFailed: current.state },
        pool: { ...current, state: "RECONCILING", pendingName: name },
      };
    });
  }

  async delete(input: DeleteNodePoolInput): Promise<TaskRecord> {
    const v = new Violations();
    v.requiredId("serviceInstanceId", input.serviceInstanceId);
    v.requiredId("nodePoolId", input.nodePoolId);
    v.throwIfAny();
    await this.existing(input.serviceInstanceId, input.nodePoolId);
    return this.startTask(input.serviceInstanceId, input.nodePoolId, "DeleteNodePool", input.createdBy, (current) => ({
      change: { name: null, count: null, stateIfFailed: "ERROR" },
      pool: { ...current, state: "DELETING" },
    }));
  }

  // Stores the task and the pool's new state in one transaction, refusing while another task of the pool is
  // unfinished: at most one per pool.
  private async startTask(
    serviceInstanceId: string,
    nodePoolId: string,
    command: TaskCommand,
    createdBy: string,
    plan: (current: NodePoolRecord) => { change: NodePoolChange; pool: NodePoolRecord },
  ): Promise<TaskRecord> {
    const now = this.clock.now();
    const started = await this.store.startPoolTask(nodePoolId, (current) => {
      if (current.activeTaskId !== null) throw nodePoolBusy(nodePoolId, current.activeTaskId);
      const { change, pool } = plan(current);
      const task = newTask(command, current, change, createdBy, now);
      return { task, pool: { ...pool, activeTaskId: task.id, modifiedAt: now } };
    });
    // Deleted between the check above and the transaction.
    if (started === null) throw nodePoolNotFound(serviceInstanceId, nodePoolId);
    this.onTaskCreated();
    return started.task;
  }
}

function newTask(command: TaskCommand, pool: NodePoolRecord, change: NodePoolChange, createdBy: string, now: number): TaskRecord {
  return {
    id: randomUUID(),
    command,
    status: "PENDING",
    serviceInstanceId: pool.serviceInstanceId,
    clusterId: pool.clusterId,
    nodePoolId: pool.id,
    change,
    createdBy,
    createdAt: now,
    modifiedAt: now,
    failure: null,
    result: null,
    attempts: 0,
  };
}
