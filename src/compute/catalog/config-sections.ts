import { clusterTypes } from "./catalog.js";
import type { ClusterType, ContainerImage, InstanceConfigs, InstanceType, Region, Resources, SparkConfig } from "./catalog.js";
import { CATALOG_ID } from "../../shared/ids.js";
import { ObjectReader, checkUnique, fail } from "./json-reader.js";

// The sections of the catalog that the configuration calls (ListConfigs, ListSparkConfigs) answer from. Both are
// optional, so that an operator's catalog written for node pools alone still loads: the calls then list nothing.

// Keys appear in other calls and in URLs: letters, digits and ". _ -" ("DGX2-MT", "a100.8gpu", "cpu.2C.8G").
const KEY = { regex: CATALOG_ID, rule: "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit" };
// A Kubernetes resource name, optionally with a DNS prefix ("cpu", "nvidia.com/gpu").
const RESOURCE_NAME = { regex: /^([a-z0-9]([a-z0-9.-]*[a-z0-9])?\/)?[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$/, rule: "a Kubernetes resource name such as cpu or nvidia.com/gpu" };
// A Kubernetes quantity as the platform writes them ("2", "500m", "8Gi").
const QUANTITY = { regex: /^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/, rule: 'a Kubernetes quantity such as "2", "500m" or "8Gi"' };

export function readInstanceConfigs(root: ObjectReader): Record<ClusterType, InstanceConfigs> {
  const section = root.child("instanceConfigs", clusterTypes, { optional: true });
  const byType = {} as Record<ClusterType, InstanceConfigs>;
  for (const type of clusterTypes) {
    const entry = section?.child(type, ["regions", "datahubImages", "customImages"], { optional: true }) ?? null;
    byType[type] = entry === null ? { regions: [], datahubImages: [], customImages: [] } : readClusterType(entry);
  }
  // MT and INF are distinct platforms: a region key names one region, whichever cluster type it serves.
  const regions = clusterTypes.flatMap((type) => byType[type].regions.map((item, i) => ({ path: `instanceConfigs.${type}.regions[${i}]`, item })));
  checkUnique(regions, (r) => r.key, "region key");
  return byType;
}

function readClusterType(r: ObjectReader): InstanceConfigs {
  const regions = r.list("regions", { optional: false, nonEmpty: true }).map(({ path, value }) => ({ path, item: readRegion(path, value) }));
  return { regions: regions.map((e) => e.item), datahubImages: readImages(r, "datahubImages"), customImages: readImages(r, "customImages") };
}

function readRegion(path: string, value: unknown): Region {
  const r = ObjectReader.at(path, value, ["key", "name", "description", "nfsName", "ssh", "instanceTypes"]);
  const types = r.list("instanceTypes", { optional: false, nonEmpty: true }).map(({ path: p, value: v }) => ({ path: p, item: readInstanceType(p, v) }));
  checkUnique(types, (t) => t.key, "instance type key");
  return {
    key: r.string("key", KEY),
    name: r.string("name"),
    description: r.optionalString("description", ""),
    nfsName: r.optionalString("nfsName", ""),
    ssh: r.optionalBoolean("ssh", false),
    instanceTypes: types.map((t) => t.item),
  };
}

function readInstanceType(path: string, value: unknown): InstanceType {
  const r = ObjectReader.at(path, value, ["key", "name", "images", "resource"]);
  return { key: r.string("key", KEY), name: r.string("name"), images: readImages(r, "images"), resource: readResources(r, "resource") };
}

function readImages(r: ObjectReader, name: string): ContainerImage[] {
  return r.list(name, { optional: true, nonEmpty: false }).map(({ path, value }) => {
    const image = ObjectReader.at(path, value, ["name", "tags"]);
    return { name: image.string("name"), tags: image.stringList("tags") };
  });
}

function readResources(r: ObjectReader, name: string): Resources {
  const resource = r.child(name, ["limits", "requests"], { optional: false })!;
  return {
    limits: resource.stringMap("limits", RESOURCE_NAME, QUANTITY),
    requests: resource.stringMap("requests", RESOURCE_NAME, QUANTITY),
  };
}

export function readSparkConfigs(root: ObjectReader, configs: Record<ClusterType, InstanceConfigs>): SparkConfig[] {
  const regions = new Set(clusterTypes.flatMap((type) => configs[type].regions.map((region) => region.key)));
  const entries = root.list("sparkConfigs", { optional: true, nonEmpty: false }).map(({ path, value }) => ({ path, item: readSparkConfig(path, value, regions) }));
  checkUnique(entries, (c) => c.key, "spark configuration key");
  return entries.map((e) => e.item);
}

function readSparkConfig(path: string, value: unknown, regions: ReadonlySet<string>): SparkConfig {
  const r = ObjectReader.at(path, value, ["key", "name", "description", "region", "images", "driver", "executor"]);
  const region = r.string("region", KEY);
  if (!regions.has(region)) fail(r.pathOf("region"), `names no region of instanceConfigs, got "${region}"`);
  const driver = r.child("driver", ["resource"], { optional: false })!;
  const executor = r.child("executor", ["resource", "instances", "maxInstances"], { optional: false })!;
  const instances = executor.integer("instances", 1, "a positive integer");
  const maxInstances = executor.optionalInteger("maxInstances", 1, "a positive integer", instances);
  if (maxInstances < instances) fail(executor.pathOf("maxInstances"), `must be at least instances (${instances}), got ${maxInstances}`);
  return {
    key: r.string("key", KEY),
    name: r.string("name"),
    description: r.optionalString("description", ""),
    region,
    images: readImages(r, "images"),
    driver: { resource: readResources(driver, "resource") },
    executor: { resource: readResources(executor, "resource"), instances, maxInstances },
  };
}
