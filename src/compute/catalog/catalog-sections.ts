import type { Catalog, Cluster, ComputeFlavor, OrgNetwork, ServiceInstance, VAppTemplate } from "./catalog.js";
import { readInstanceConfigs, readSparkConfigs } from "./config-sections.js";
import { ObjectReader, checkUnique } from "./json-reader.js";
import { CATALOG_ID } from "../../shared/ids.js";

// The catalog file is one JSON object; each top-level key is a section read and checked by its own function. More
// platform data (regions, instance types, images) becomes one more section here and one more field of Catalog.
const sectionNames = ["computeFlavors", "serviceInstances", "instanceConfigs", "sparkConfigs"] as const satisfies readonly (keyof Catalog)[];

// Identifiers appear in URL paths, so they are kept to characters that need no escaping.
const ID = { regex: CATALOG_ID, rule: "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit" };
const POSITIVE = "a positive integer";
const NOT_NEGATIVE = "an integer of 0 or more";

export function readCatalog(json: unknown): Catalog {
  const root = ObjectReader.at("", json, sectionNames);
  const instanceConfigs = readInstanceConfigs(root);
  return {
    computeFlavors: readComputeFlavors(root),
    serviceInstances: readServiceInstances(root),
    instanceConfigs,
    sparkConfigs: readSparkConfigs(root, instanceConfigs),
  };
}

function readComputeFlavors(root: ObjectReader): ComputeFlavor[] {
  const entries = root.list("computeFlavors", { optional: false, nonEmpty: true }).map(({ path, value }) => ({ path, item: readFlavor(path, value) }));
  checkUnique(entries, (f) => f.id, "flavor id");
  return entries.map((e) => e.item);
}

function readFlavor(path: string, value: unknown): ComputeFlavor {
  const r = ObjectReader.at(path, value, ["id", "description", "cpu", "memoryGiB", "diskGiB", "gpu", "gpuModel", "available"]);
  const gpu = r.optionalInteger("gpu", 0, NOT_NEGATIVE, 0);
  return {
    id: r.string("id", ID),
    description: r.optionalString("description", ""),
    cpu: r.integer("cpu", 1, POSITIVE),
    memoryGiB: r.integer("memoryGiB", 1, POSITIVE),
    diskGiB: r.integer("diskGiB", 1, POSITIVE),
    gpu,
    gpuModel: gpu > 0 ? r.string("gpuModel") : r.optionalString("gpuModel", ""),
    available: r.optionalBoolean("available", true),
  };
}

function readServiceInstances(root: ObjectReader): ServiceInstance[] {
  const entries = root
    .list("serviceInstances", { optional: false, nonEmpty: true })
    .map(({ path, value }) => ({ path, item: readServiceInstance(path, value) }));
  checkUnique(entries, (s) => s.id, "service instance id");
  // Cluster ids are unique across the whole catalog: a node pool names its cluster by id alone.
  const clusters = entries.flatMap(({ path, item }) => item.clusters.map((c, i) => ({ path: `${path}.clusters[${i}].id`, item: c })));
  checkUnique(clusters, (c) => c.id, "cluster id");
  return entries.map((e) => e.item);
}

function readServiceInstance(path: string, value: unknown): ServiceInstance {
  const r = ObjectReader.at(path, value, ["id", "name", "clusters", "orgNetworks", "vAppTemplates"]);
  const id = r.string("id", ID);
  const name = r.string("name");
  const clusters = r.list("clusters", { optional: false, nonEmpty: true }).map(({ path: p, value: v }) => ({ path: p, item: readCluster(p, v) }));
  const orgNetworks = r.list("orgNetworks", { optional: true, nonEmpty: false }).map(({ path: p, value: v }) => ({ path: p, item: readNamed(p, v) }));
  const vAppTemplates = r.list("vAppTemplates", { optional: true, nonEmpty: false }).map(({ path: p, value: v }) => ({ path: p, item: readNamed(p, v) }));
  checkUnique(orgNetworks, (n) => n.id, "org network id");
  checkUnique(vAppTemplates, (t) => t.id, "vApp template id");
  return {
    id,
    name,
    clusters: clusters.map((c) => c.item),
    orgNetworks: orgNetworks.map((n) => n.item),
    vAppTemplates: vAppTemplates.map((t) => t.item),
  };
}

function readCluster(path: string, value: unknown): Cluster {
  const r = ObjectReader.at(path, value, ["id", "name", "capacity", "maxPoolSize"]);
  return {
    id: r.string("id", ID),
    name: r.string("name"),
    capacity: r.integer("capacity", 1, POSITIVE),
    maxPoolSize: r.integer("maxPoolSize", 1, POSITIVE),
  };
}

// Org networks and vApp templates: checked loosely (see catalog.ts).
function readNamed(path: string, value: unknown): OrgNetwork & VAppTemplate {
  const r = ObjectReader.at(path, value, null);
  return { id: r.string("id", ID), name: r.string("name"), attributes: r.scalars(["id", "name"]) };
}
