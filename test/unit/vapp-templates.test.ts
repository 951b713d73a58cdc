import { describe, expect, it } from "vitest";
import { readCatalog } from "../../src/compute/catalog/catalog-sections.js";
import { templatesOf } from "../../src/compute/vapps/vapp-templates.js";

function catalogWith(templates: object[][]): ReturnType<typeof readCatalog> {
  return readCatalog({
    computeFlavors: [{ id: "f", cpu: 1, memoryGiB: 1, diskGiB: 1 }],
    serviceInstances: templates.map((vAppTemplates, i) => ({ id: `vdc-${i}`, name: `vdc ${i}`, clusters: [{ id: `c-${i}`, name: "c", capacity: 1, maxPoolSize: 1 }], vAppTemplates })),
  });
}

describe("vApp templates of the catalog", () => {
  it("take the record attributes given, and defaults for the rest", () => {
    const [given, plain] = templatesOf(catalogWith([[{ id: "a", name: "A", catalogName: "mine", isGoldMaster: true, needsEula: true, isEnabled: false }, { id: "b", name: "B" }]]));
    expect(given).toEqual({
      id: "a",
      name: "A",
      catalogName: "mine",
      serviceInstanceId: "vdc-0",
      vdcName: "vdc 0",
      ownerName: "system",
      status: "RESOLVED",
      isDeployed: false,
      isGoldMaster: true,
      isEnabled: false,
      storageProfileName: "*",
      needsEula: true,
    });
    expect(plain).toMatchObject({ catalogName: "public-templates", isGoldMaster: false, isEnabled: true, needsEula: false });
  });

  it("refuse an unknown attribute, a value of the wrong type, and an id used in two vDCs", () => {
    expect(() => templatesOf(catalogWith([[{ id: "a", name: "A", colour: "red" }]]))).toThrow(
      "catalog: serviceInstances[0].vAppTemplates[0].colour is not a known field; allowed: id, name, catalogName, ownerName, storageProfileName, isGoldMaster, isEnabled, needsEula",
    );
    expect(() => templatesOf(catalogWith([[{ id: "a", name: "A", needsEula: "yes" }]]))).toThrow('catalog: serviceInstances[0].vAppTemplates[0].needsEula must be true or false, got "yes"');
    expect(() => templatesOf(catalogWith([[{ id: "a", name: "A", ownerName: 3 }]]))).toThrow("catalog: serviceInstances[0].vAppTemplates[0].ownerName must be a string, got 3");
    expect(() => templatesOf(catalogWith([[{ id: "a", name: "A" }], [{ id: "a", name: "again" }]]))).toThrow(
      'catalog: serviceInstances[1].vAppTemplates[0].id repeats the vApp template id "a" of serviceInstances[0].vAppTemplates[0]',
    );
  });
});
