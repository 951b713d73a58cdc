import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Catalog } from "./catalog.js";
import { readCatalog } from "./catalog-sections.js";
import { readSettingFile } from "../../shared/setting-file.js";
import { CatalogError } from "./json-reader.js";

// The catalog shipped with the project, at catalog/default-catalog.json in the package root. The root is found by
// walking up to package.json, so the path is the same whether this runs from src/ (tsx) or dist/src/ (npm start).
export function shippedCatalogPath(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const parent = dirname(dir);
    if (parent === dir) throw new CatalogError("catalog: cannot find the package root holding catalog/default-catalog.json");
    dir = parent;
  }
  return join(dir, "catalog", "default-catalog.json");
}

// The shipped catalog is 30 KB; a thousand times that is still a catalog, and bounds what a wrong file can cost.
export const CATALOG_FILE_MAX_BYTES = 32 << 20;

// Reads and checks the catalog file (a regular file of at most CATALOG_FILE_MAX_BYTES, else a ConfigError). Throws a
// CatalogError naming the file and the first bad entry; the server does not start with a catalog it cannot trust.
export function loadCatalog(path: string): Catalog {
  const text = readSettingFile("--catalog (CATALOG_FILE)", path, CATALOG_FILE_MAX_BYTES).toString("utf8");
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new CatalogError(`catalog: ${path} is not valid JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  try {
    return readCatalog(json);
  } catch (err) {
    if (err instanceof CatalogError) throw new CatalogError(`${err.message} (in ${path})`);
    throw err;
  }
}
