import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadCatalog, shippedCatalogPath } from "../../src/compute/catalog/load-catalog.js";
import { spawnServer, startServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { rest, testCatalog } from "./compute-helpers.js";

// The catalog is read when the server starts: the shipped one by default, an operator's with --catalog, and a
// bad one keeps the server from starting at all.
describe("the platform catalog at start", () => {
  let dir: ReturnType<typeof tempDir>;
  beforeEach(() => {
    dir = tempDir();
  });
  afterEach(() => dir.remove());

  it("serves the shipped catalog when none is given", async () => {
    const server = await startServer({ env: { PROVIDER_DELAY_MS: "0" } });
    try {
      const [instance] = loadCatalog(shippedCatalogPath()).serviceInstances;
      const listed = await rest(server.url, "GET", `/cluster/v1/${instance!.id}/node-pools?clusterId=${instance!.clusters[0]!.id}`);
      expect(listed).toEqual({ status: 200, json: {} });
    } finally {
      await server.stop();
    }
  });

  it("refuses to start with a bad catalog and names the bad entry", async () => {
    const path = join(dir.path, "catalog.json");
    const bad = structuredClone(testCatalog);
    bad.serviceInstances[1]!.clusters[0]!.capacity = 0;
    writeFileSync(path, JSON.stringify(bad));
    const started = spawnServer({ dataDir: join(dir.path, "data"), env: { CATALOG_FILE: path } });
    await expect(started).rejects.toThrow(`catalog: serviceInstances[1].clusters[0].capacity must be a positive integer, got 0 (in ${path})`);
  });
});
