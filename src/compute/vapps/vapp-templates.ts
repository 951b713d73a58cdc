import type { Catalog, ServiceInstance, VAppTemplate } from "../catalog/catalog.js";
import { CatalogError } from "../catalog/json-reader.js";
import type { JsonScalar } from "../catalog/json-reader.js";

// A vApp template as the query service lists it: the catalog's entry with the record attributes of the
// virtualization API's VAppTemplateRecord.
export interface TemplateRecord {
  id: string;
  name: string;
  catalogName: string;
  serviceInstanceId: string;
  vdcName: string;
  ownerName: string;
  // Catalog templates are ready to use: RESOLVED (status 8 in the virtualization API).
  status: "RESOLVED";
  isDeployed: boolean;
  isGoldMaster: boolean;
  isEnabled: boolean;
  storageProfileName: string;
  needsEula: boolean;
}

// The loose attributes a catalog template entry may carry (catalog-sections.ts keeps them as scalars), each with
// its type and default.
const attributes = {
  catalogName: { type: "string", fallback: "public-templates" },
  ownerName: { type: "string", fallback: "system" },
  storageProfileName: { type: "string", fallback: "*" },
  isGoldMaster: { type: "boolean", fallback: false },
  isEnabled: { type: "boolean", fallback: true },
  needsEula: { type: "boolean", fallback: false },
} as const;

// Every template of the catalog, checked once at start: a catalog whose template attributes have the wrong type
// or an unknown name stops the server, as any other bad catalog entry does.
export function templatesOf(catalog: Catalog): TemplateRecord[] {
  const all: TemplateRecord[] = [];
  const seen = new Map<string, string>();
  catalog.serviceInstances.forEach((instance, i) => {
    instance.vAppTemplates.forEach((template, j) => {
      const path = `serviceInstances[${i}].vAppTemplates[${j}]`;
      const earlier = seen.get(template.id);
      // Template hrefs carry the id alone, so it must name one template on the whole platform.
      if (earlier !== undefined) throw new CatalogError(`catalog: ${path}.id repeats the vApp template id "${template.id}" of ${earlier}`);
      seen.set(template.id, path);
      all.push(recordOf(path, instance, template));
    });
  });
  return all;
}

function recordOf(path: string, instance: ServiceInstance, template: VAppTemplate): TemplateRecord {
  for (const name of Object.keys(template.attributes)) {
    if (!(name in attributes)) {
      throw new CatalogError(`catalog: ${path}.${name} is not a known field; allowed: id, name, ${Object.keys(attributes).join(", ")}`);
    }
  }
  const string = (name: "catalogName" | "ownerName" | "storageProfileName"): string => {
    const value = read(path, template.attributes, name);
    return typeof value === "string" ? value : attributes[name].fallback;
  };
  const boolean = (name: "isGoldMaster" | "isEnabled" | "needsEula"): boolean => {
    const value = read(path, template.attributes, name);
    return typeof value === "boolean" ? value : attributes[name].fallback;
  };
  return {
    id: template.id,
    name: template.name,
    catalogName: string("catalogName"),
    serviceInstanceId: instance.id,
    vdcName: instance.name,
    ownerName: string("ownerName"),
    status: "RESOLVED",
    isDeployed: false,
    isGoldMaster: boolean("isGoldMaster"),
    isEnabled: boolean("isEnabled"),
    storageProfileName: string("storageProfileName"),
    needsEula: boolean("needsEula"),
  };
}

function read(path: string, given: Record<string, JsonScalar>, name: keyof typeof attributes): JsonScalar | undefined {
  const value = given[name];
  const type = attributes[name].type;
  if (value !== undefined && typeof value !== type) {
    throw new CatalogError(`catalog: ${path}.${name} must be ${type === "boolean" ? "true or false" : "a string"}, got ${JSON.stringify(value)}`);
  }
  return value;
}
