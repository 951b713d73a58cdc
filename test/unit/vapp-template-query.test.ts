import { describe, expect, it } from "vitest";
import { matches, queryTemplates } from "../../src/compute/vapps/template-query.js";
import type { TemplateRecord } from "../../src/compute/vapps/vapp-templates.js";
import { DomainError } from "../../src/errors/domain-error.js";

function template(id: string, name: string, more: Partial<TemplateRecord> = {}): TemplateRecord {
  return {
    id,
    name,
    catalogName: "c",
    serviceInstanceId: "vdc-1",
    vdcName: "one",
    ownerName: "system",
    status: "RESOLVED",
    isDeployed: false,
    isGoldMaster: false,
    isEnabled: true,
    storageProfileName: "ssd",
    needsEula: false,
    ...more,
  };
}

const all = [template("t1", "Ubuntu"), template("t2", "centos", { isGoldMaster: true }), template("t3", "debian", { serviceInstanceId: "vdc-2" }), template("t4", "ubuntu")];
const query = { page: 0, pageSize: 0, filter: "", sortAsc: "", sortDesc: "" };

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    if (err instanceof DomainError) return err.message;
    throw err;
  }
  throw new Error("not refused");
}

describe("the vApp template query", () => {
  it("matches case-insensitively with * for any characters, none included", () => {
    expect(matches("Ubuntu-22.04", "ubuntu*")).toBe(true);
    expect(matches("Ubuntu-22.04", "*22*")).toBe(true);
    expect(matches("Ubuntu-22.04", "*.04")).toBe(true);
    expect(matches("Ubuntu-22.04", "u*u*4")).toBe(true);
    expect(matches("ab", "a*b*b")).toBe(false);
    expect(matches("aba", "ab*ba")).toBe(false);
    expect(matches("", "*")).toBe(true);
    expect(matches("x", "")).toBe(false);
    expect(matches("a.b", "a?b")).toBe(false);
  });

  it("sorts by name, ties by id, and pages with defaults 1 and 25", () => {
    const page = queryTemplates(all, query);
    expect(page.templates.map((t) => t.id)).toEqual(["t2", "t3", "t1", "t4"]);
    expect([page.page, page.pageSize, page.total]).toEqual([1, 25, 4]);
    expect(queryTemplates(all, { ...query, page: 2, pageSize: 3 }).templates.map((t) => t.id)).toEqual(["t4"]);
    expect(queryTemplates(all, { ...query, sortDesc: "name" }).templates.map((t) => t.id)).toEqual(["t4", "t1", "t3", "t2"]);
  });

  it("filters with ==, != and ;, a vDC by id or href", () => {
    const ids = (filter: string): string[] => queryTemplates(all, { ...query, filter }).templates.map((t) => t.id);
    expect(ids("name==UBUNTU")).toEqual(["t1", "t4"]);
    expect(ids("name!=ubuntu;isGoldMaster==false")).toEqual(["t3"]);
    expect(ids("vdc==https://site/api/vdc/vdc-2")).toEqual(["t3"]);
    expect(ids("vdc==vdc-1;name==c*")).toEqual(["t2"]);
  });

  it("refuses bad pages, sizes, filters and sorts, naming each", () => {
    expect(refusal(() => queryTemplates(all, { ...query, page: -1, pageSize: 129, filter: "x==1", sortAsc: "size" }))).toBe(
      'page: must be 1 or more (0 or none is the first page), got -1; pageSize: must be from 1 to 128 (0 or none is 25), got 129; filter: unknown attribute "x"; allowed: name, catalogName, vdc, vdcName, ownerName, status, isDeployed, isGoldMaster, isEnabled, storageProfileName; sortAsc: must be one of name, catalogName, vdc, vdcName, ownerName, status, isDeployed, isGoldMaster, isEnabled, storageProfileName, got "size"',
    );
    expect(refusal(() => queryTemplates(all, { ...query, page: 3, pageSize: 2 }))).toBe("page: must be at most 2, the last page of 4 records at 2 a page; got 3");
    expect(refusal(() => queryTemplates(all, { ...query, filter: "toString==x" }))).toContain('unknown attribute "toString"');
    expect(queryTemplates([], query).total).toBe(0);
  });
});
