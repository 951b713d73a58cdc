import { describe, expect, it } from "vitest";
import { readCatalog } from "../../src/compute/catalog/catalog-sections.js";
import { CatalogError } from "../../src/compute/catalog/json-reader.js";
import { loadCatalog, shippedCatalogPath } from "../../src/compute/catalog/load-catalog.js";

// The catalog's configuration sections (instanceConfigs, sparkConfigs), read and checked at start like the others.

const base = {
  computeFlavors: [{ id: "cpu.small", cpu: 2, memoryGiB: 8, diskGiB: 50 }],
  serviceInstances: [{ id: "vdc-a", name: "a", clusters: [{ id: "cl-1", name: "one", capacity: 4, maxPoolSize: 8 }] }],
};

function region(key: string) {
  return {
    key,
    name: key,
    instanceTypes: [{ key: "a100.1gpu", name: "1 x A100", images: [{ name: "img:1", tags: ["cuda"] }], resource: { limits: { cpu: "16", memory: "243Gi", "nvidia.com/gpu": "1" } } }],
  };
}

function valid() {
  return {
    ...base,
    instanceConfigs: { MT: { regions: [region("SR006")], datahubImages: [{ name: "img:1" }] }, INF: { regions: [region("A100-INF-001")] } },
    sparkConfigs: [
      {
        key: "spark.small",
        name: "small",
        region: "SR006",
        driver: { resource: { limits: { cpu: "1", memory: "4Gi" } } },
        executor: { resource: { limits: { cpu: "2", memory: "8Gi" } }, instances: 2, maxInstances: 4 },
      },
    ],
  };
}

type Doc = ReturnType<typeof valid>;

function messageOf(doc: unknown): string {
  try {
    readCatalog(doc);
  } catch (err) {
    if (err instanceof CatalogError) return err.message;
    throw err;
  }
  return "accepted";
}

describe("the configuration sections of the catalog", () => {
  it("are shipped with distinct MT and INF regions and spark configurations", () => {
    const catalog = loadCatalog(shippedCatalogPath());
    const keys = (type: "MT" | "INF") => catalog.instanceConfigs[type].regions.map((r) => r.key);
    expect(keys("MT")).toContain("DGX2-MT");
    expect(keys("INF")).toContain("DGX2-INF-001");
    expect(keys("MT").filter((k) => keys("INF").includes(k))).toEqual([]);
    expect(catalog.sparkConfigs.length).toBeGreaterThan(0);
  });

  it("are optional: a catalog without them lists nothing", () => {
    const catalog = readCatalog(base);
    expect(catalog.instanceConfigs).toEqual({ MT: { regions: [], datahubImages: [], customImages: [] }, INF: { regions: [], datahubImages: [], customImages: [] } });
    expect(catalog.sparkConfigs).toEqual([]);
  });

  it("read defaults", () => {
    const catalog = readCatalog(valid());
    expect(catalog.instanceConfigs.MT.regions[0]).toMatchObject({ description: "", nfsName: "", ssh: false });
    expect(catalog.instanceConfigs.MT.regions[0]!.instanceTypes[0]!.resource.requests).toEqual({});
    expect(catalog.instanceConfigs.INF.datahubImages).toEqual([]);
    expect(catalog.instanceConfigs.MT.datahubImages).toEqual([{ name: "img:1", tags: [] }]);
  });

  const cases: [string, (d: Doc) => unknown, string][] = [
    ["a cluster type other than MT and INF", (d) => ({ ...d, instanceConfigs: { ...d.instanceConfigs, GPU: {} } }), "catalog: instanceConfigs.GPU is not a known field; allowed: MT, INF"],
    [
      "a region key in both MT and INF",
      (d) => ({ ...d, instanceConfigs: { MT: d.instanceConfigs.MT, INF: { regions: [region("SR006")] } } }),
      `catalog: instanceConfigs.INF.regions[0] repeats the region key "SR006" of instanceConfigs.MT.regions[0]`,
    ],
    [
      "a quantity that is not Kubernetes'",
      (d) => {
        d.instanceConfigs.MT.regions[0]!.instanceTypes[0]!.resource.limits.memory = "8 GB";
        return d;
      },
      `catalog: instanceConfigs.MT.regions[0].instanceTypes[0].resource.limits.memory must be a Kubernetes quantity such as "2", "500m" or "8Gi", got "8 GB"`,
    ],
    [
      "a bad resource name",
      (d) => {
        (d.instanceConfigs.MT.regions[0]!.instanceTypes[0]!.resource.limits as Record<string, string>)["nvidia.com/"] = "1";
        return d;
      },
      "catalog: instanceConfigs.MT.regions[0].instanceTypes[0].resource.limits.nvidia.com/ is not a valid name: must be a Kubernetes resource name such as cpu or nvidia.com/gpu",
    ],
    [
      "a repeated instance type",
      (d) => {
        const types = d.instanceConfigs.MT.regions[0]!.instanceTypes;
        types.push(types[0]!);
        return d;
      },
      `catalog: instanceConfigs.MT.regions[0].instanceTypes[1] repeats the instance type key "a100.1gpu" of instanceConfigs.MT.regions[0].instanceTypes[0]`,
    ],
    [
      "a spark configuration in an unknown region",
      (d) => {
        d.sparkConfigs[0]!.region = "nowhere";
        return d;
      },
      `catalog: sparkConfigs[0].region names no region of instanceConfigs, got "nowhere"`,
    ],
    [
      "fewer executors at most than at start",
      (d) => {
        d.sparkConfigs[0]!.executor.maxInstances = 1;
        return d;
      },
      "catalog: sparkConfigs[0].executor.maxInstances must be at least instances (2), got 1",
    ],
    [
      "a tag that is not a string",
      (d) => ({ ...d, instanceConfigs: { ...d.instanceConfigs, MT: { ...d.instanceConfigs.MT, customImages: [{ name: "x", tags: [1] }] } } }),
      "catalog: instanceConfigs.MT.customImages[0].tags[0] must be a non-empty string, got 1",
    ],
  ];

  it.each(cases)("reject %s, naming the entry", (_, mutate, message) => {
    expect(messageOf(mutate(valid()))).toBe(message);
  });
});
