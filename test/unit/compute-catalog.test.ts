import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readCatalog } from "../../src/compute/catalog/catalog-sections.js";
import { CatalogError } from "../../src/compute/catalog/json-reader.js";
import { loadCatalog, shippedCatalogPath } from "../../src/compute/catalog/load-catalog.js";
import { tempDir } from "../support/temp-dir.js";

function valid() {
  return {
    computeFlavors: [
      { id: "cpu.small", cpu: 2, memoryGiB: 8, diskGiB: 50 },
      { id: "gpu.big", cpu: 8, memoryGiB: 64, diskGiB: 200, gpu: 1, gpuModel: "V100", available: false },
    ],
    serviceInstances: [
      {
        id: "vdc-a",
        name: "a",
        clusters: [{ id: "cl-1", name: "one", capacity: 4, maxPoolSize: 8 }],
        orgNetworks: [{ id: "net-1", name: "default", fenceMode: "bridged" }],
        vAppTemplates: [{ id: "tpl-1", name: "ubuntu", needsEula: false }],
      },
      { id: "vdc-b", name: "b", clusters: [{ id: "cl-2", name: "two", capacity: 2, maxPoolSize: 2 }] },
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

describe("catalog", () => {
  it("ships a default catalog that loads", () => {
    const catalog = loadCatalog(shippedCatalogPath());
    expect(catalog.serviceInstances.length).toBeGreaterThan(0);
    expect(catalog.computeFlavors.some((f) => !f.available)).toBe(true);
    for (const instance of catalog.serviceInstances) {
      expect(instance.orgNetworks.length).toBeGreaterThan(0);
      expect(instance.vAppTemplates.length).toBeGreaterThan(0);
    }
  });

  it("reads defaults and keeps the loose attributes of networks and templates", () => {
    const catalog = readCatalog(valid());
    expect(catalog.computeFlavors[0]).toEqual({ id: "cpu.small", description: "", cpu: 2, memoryGiB: 8, diskGiB: 50, gpu: 0, gpuModel: "", available: true });
    expect(catalog.serviceInstances[0]?.orgNetworks[0]).toEqual({ id: "net-1", name: "default", attributes: { fenceMode: "bridged" } });
    expect(catalog.serviceInstances[1]?.vAppTemplates).toEqual([]);
  });

  const cases: [string, (d: Doc) => unknown, string][] = [
    ["not an object", () => [], "catalog: the document must be an object, got an array"],
    ["an unknown section", (d) => ({ ...d, regions: [] }), "catalog: regions is not a known field; allowed: computeFlavors, serviceInstances, instanceConfigs, sparkConfigs"],
    ["a missing section", (d) => ({ computeFlavors: d.computeFlavors }), "catalog: serviceInstances is required"],
    [
      "a bad capacity",
      (d) => {
        d.serviceInstances[1]!.clusters[0]!.capacity = 0;
        return d;
      },
      "catalog: serviceInstances[1].clusters[0].capacity must be a positive integer, got 0",
    ],
    [
      "a fractional pool size",
      (d) => {
        d.serviceInstances[0]!.clusters[0]!.maxPoolSize = 1.5;
        return d;
      },
      "catalog: serviceInstances[0].clusters[0].maxPoolSize must be a positive integer, got 1.5",
    ],
    [
      "an id with a slash",
      (d) => {
        d.serviceInstances[0]!.id = "a/b";
        return d;
      },
      `catalog: serviceInstances[0].id must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, got "a/b"`,
    ],
    [
      "a typo in a cluster",
      (d) => ({ ...d, serviceInstances: [{ ...d.serviceInstances[0], clusters: [{ id: "c", name: "c", capacity: 1, maxPoolsize: 1 }] }] }),
      "catalog: serviceInstances[0].clusters[0].maxPoolsize is not a known field; allowed: id, name, capacity, maxPoolSize",
    ],
    [
      "a duplicate cluster id across instances",
      (d) => {
        d.serviceInstances[1]!.clusters[0]!.id = "cl-1";
        return d;
      },
      `catalog: serviceInstances[1].clusters[0].id repeats the cluster id "cl-1" of serviceInstances[0].clusters[0].id`,
    ],
    [
      "a duplicate flavor",
      (d) => {
        d.computeFlavors[1]!.id = "cpu.small";
        return d;
      },
      `catalog: computeFlavors[1] repeats the flavor id "cpu.small" of computeFlavors[0]`,
    ],
    [
      "a GPU flavor without its model",
      (d) => ({ ...d, computeFlavors: [{ id: "g", cpu: 1, memoryGiB: 1, diskGiB: 1, gpu: 2 }] }),
      "catalog: computeFlavors[0].gpuModel is required",
    ],
    [
      "availability that is not a boolean",
      (d) => ({ ...d, computeFlavors: [{ id: "g", cpu: 1, memoryGiB: 1, diskGiB: 1, available: "no" }] }),
      `catalog: computeFlavors[0].available must be true or false, got "no"`,
    ],
    ["an empty cluster list", (d) => ({ ...d, serviceInstances: [{ id: "x", name: "x", clusters: [] }] }), "catalog: serviceInstances[0].clusters must not be empty"],
    [
      "a nested value in a template",
      (d) => ({ ...d, serviceInstances: [{ ...d.serviceInstances[0], vAppTemplates: [{ id: "t", name: "t", disks: [1] }] }] }),
      "catalog: serviceInstances[0].vAppTemplates[0].disks must be a string, number or boolean, got an array",
    ],
  ];

  it.each(cases)("rejects %s, naming the entry", (_, mutate, message) => {
    expect(messageOf(mutate(valid()))).toBe(message);
  });

  describe("from a file", () => {
    let dir: ReturnType<typeof tempDir>;
    beforeEach(() => {
      dir = tempDir();
    });
    afterEach(() => dir.remove());

    it("names the file in every complaint", () => {
      const path = join(dir.path, "catalog.json");
      expect(() => loadCatalog(path)).toThrow(`--catalog (CATALOG_FILE) ${path} does not exist`);
      writeFileSync(path, "{ not json");
      expect(() => loadCatalog(path)).toThrow(`catalog: ${path} is not valid JSON`);
      const doc = valid();
      doc.serviceInstances[1]!.clusters[0]!.capacity = -3;
      writeFileSync(path, JSON.stringify(doc));
      expect(() => loadCatalog(path)).toThrow(`catalog: serviceInstances[1].clusters[0].capacity must be a positive integer, got -3 (in ${path})`);
    });
  });
});
