import type { JsonScalar } from "./json-reader.js";

// The platform catalog (CONTRACT section 6): what exists on the platform, read from a data file at start and fixed
// while the server runs. Handlers look things up here instead of hard-coding them.

export interface ComputeFlavor {
  id: string;
  description: string;
  cpu: number;
  memoryGiB: number;
  diskGiB: number;
  gpu: number;
  gpuModel: string;
  // An unavailable flavor is known (requests naming it are valid) but has no nodes to give: provisioning it fails
  // with UNAVAILABLE and a retry delay.
  available: boolean;
}

export interface Cluster {
  id: string;
  name: string;
  // Nodes the cluster can hold across all its pools.
  capacity: number;
  // Largest node count one pool may ask for. It may exceed the free capacity; that is checked when the nodes are
  // provisioned, not when the request arrives.
  maxPoolSize: number;
}

// Org networks and vApp templates are read loosely: an id and a name, plus plain attributes that the
// virtualization API validates with its own rules.
export interface OrgNetwork {
  id: string;
  name: string;
  attributes: Record<string, JsonScalar>;
}

export interface VAppTemplate {
  id: string;
  name: string;
  attributes: Record<string, JsonScalar>;
}

// A virtual data center (vDC); serviceInstanceId in the node pool API.
export interface ServiceInstance {
  id: string;
  name: string;
  clusters: Cluster[];
  orgNetworks: OrgNetwork[];
  vAppTemplates: VAppTemplate[];
}

// The two kinds of cluster of the configuration calls: MT for training and Jupyter servers, INF for deployments.
export const clusterTypes = ["MT", "INF"] as const;
export type ClusterType = (typeof clusterTypes)[number];

export interface ContainerImage {
  name: string;
  tags: string[];
}

// Kubernetes resources by resource name ("cpu", "memory", "nvidia.com/gpu"), quantities as written ("8Gi").
export interface Resources {
  limits: Record<string, string>;
  requests: Record<string, string>;
}

export interface InstanceType {
  key: string;
  name: string;
  images: ContainerImage[];
  resource: Resources;
}

// A region of the configuration calls (ClusterConfig on the wire).
export interface Region {
  key: string;
  name: string;
  description: string;
  nfsName: string;
  ssh: boolean;
  instanceTypes: InstanceType[];
}

// What ListConfigs answers for one cluster type.
export interface InstanceConfigs {
  regions: Region[];
  datahubImages: ContainerImage[];
  customImages: ContainerImage[];
}

export interface SparkConfig {
  key: string;
  name: string;
  description: string;
  // The key of a region of the catalog.
  region: string;
  images: ContainerImage[];
  driver: { resource: Resources };
  executor: { resource: Resources; instances: number; maxInstances: number };
}

export interface Catalog {
  computeFlavors: ComputeFlavor[];
  serviceInstances: ServiceInstance[];
  instanceConfigs: Record<ClusterType, InstanceConfigs>;
  sparkConfigs: SparkConfig[];
}

export function findServiceInstance(catalog: Catalog, id: string): ServiceInstance | undefined {
  return catalog.serviceInstances.find((s) => s.id === id);
}

export function findCluster(instance: ServiceInstance, id: string): Cluster | undefined {
  return instance.clusters.find((c) => c.id === id);
}

export function findFlavor(catalog: Catalog, id: string): ComputeFlavor | undefined {
  return catalog.computeFlavors.find((f) => f.id === id);
}
