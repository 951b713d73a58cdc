import { DomainError, alreadyExists, notFound } from "../errors/domain-error.js";

// The errors of the node pool and task domain, in one place so that reasons, resource types and wording stay
// consistent between the synchronous checks, the store and the provider.

const NODE_POOL = "compute.cluster.v1.NodePool";
const TASK = "compute.cluster.v1.Task";

// A retry of a flavor that is sold out makes sense after capacity is added, which is not a matter of seconds.
const FLAVOR_RETRY_SECONDS = 300;

export function serviceInstanceNotFound(id: string): DomainError {
  return notFound("compute", "SERVICE_INSTANCE_NOT_FOUND", { resourceType: "service instance", resourceName: id }, `service instance ${id} not found`);
}

export function clusterNotFound(serviceInstanceId: string, clusterId: string): DomainError {
  return notFound(
    "compute",
    "CLUSTER_NOT_FOUND",
    { resourceType: "cluster", resourceName: clusterId, owner: serviceInstanceId },
    `service instance ${serviceInstanceId} has no cluster ${clusterId}`,
  );
}

export function nodePoolNotFound(serviceInstanceId: string, nodePoolId: string): DomainError {
  return notFound(
    "compute",
    "NODE_POOL_NOT_FOUND",
    { resourceType: NODE_POOL, resourceName: nodePoolId, owner: serviceInstanceId },
    `service instance ${serviceInstanceId} has no node pool ${nodePoolId}`,
  );
}

export function taskNotFound(serviceInstanceId: string, taskId: string): DomainError {
  return notFound(
    "compute",
    "TASK_NOT_FOUND",
    { resourceType: TASK, resourceName: taskId, owner: serviceInstanceId },
    `service instance ${serviceInstanceId} has no task ${taskId}`,
  );
}

export function nodePoolNameTaken(clusterId: string, name: string, holderId: string): DomainError {
  return alreadyExists(
    "compute",
    "NODE_POOL_NAME_TAKEN",
    { resourceType: NODE_POOL, resourceName: holderId, owner: clusterId },
    `cluster ${clusterId} already has a node pool named "${name}" (node pool ${holderId})`,
  );
}

// The caller can wait for the named task and try again; metadata carries its id for programs.
export function nodePoolBusy(nodePoolId: string, taskId: string): DomainError {
  const message = `node pool ${nodePoolId} has an unfinished task ${taskId}; wait for it to finish before changing the pool again`;
  return new DomainError({
    code: "failed_precondition",
    reason: "NODE_POOL_TASK_IN_PROGRESS",
    domain: "compute",
    message,
    metadata: { nodePoolId, taskId },
    violations: [{ type: "STATE", subject: `nodePools/${nodePoolId}`, description: message }],
  });
}

export interface CapacityShortfall {
  clusterId: string;
  capacity: number;
  free: number;
  nodePoolId: string;
  requested: number;
}

// Retrying the same change does not help until other pools shrink, so there is no RetryInfo.
export function nodeCapacityExhausted(s: CapacityShortfall): DomainError {
  const message =
    `cluster ${s.clusterId} has room for ${s.free} more nodes (capacity ${s.capacity}) and node pool ${s.nodePoolId} ` +
    `asks for ${s.requested}; lower scalePolicy.fixedScale.count or free nodes in other pools`;
  return new DomainError({
    code: "resource_exhausted",
    reason: "NODE_CAPACITY_EXHAUSTED",
    domain: "compute",
    message,
    metadata: { clusterId: s.clusterId, capacity: String(s.capacity), free: String(s.free), requested: String(s.requested) },
    violations: [{ subject: `clusters/${s.clusterId}`, description: `node capacity ${s.capacity}, ${s.free} free, ${s.requested} requested` }],
  });
}

export function computeFlavorUnavailable(flavor: string): DomainError {
  return new DomainError({
    code: "unavailable",
    reason: "COMPUTE_FLAVOR_UNAVAILABLE",
    domain: "compute",
    message: `compute flavor ${flavor} has no nodes to give now; retry later or choose another flavor`,
    metadata: { computeFlavor: flavor },
    retryAfterSeconds: FLAVOR_RETRY_SECONDS,
  });
}
