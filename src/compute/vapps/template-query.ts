import { Violations } from "../violations.js";
import type { TemplateRecord } from "./vapp-templates.js";

// The virtualization API's query service over vApp templates (CONTRACT section 7): filter, sort and page. Shared
// by the XML surface and VAppService, so that both list the same templates in the same order.

export const DEFAULT_PAGE_SIZE = 25;
export const MAX_PAGE_SIZE = 128;

// The record attributes a filter or sort may name, and how each reads from a template.
const queryAttributes: Record<string, (t: TemplateRecord) => string> = {
  name: (t) => t.name,
  catalogName: (t) => t.catalogName,
  vdc: (t) => t.serviceInstanceId,
  vdcName: (t) => t.vdcName,
  ownerName: (t) => t.ownerName,
  status: (t) => t.status,
  isDeployed: (t) => String(t.isDeployed),
  isGoldMaster: (t) => String(t.isGoldMaster),
  isEnabled: (t) => String(t.isEnabled),
  storageProfileName: (t) => t.storageProfileName,
};
const attributeNames = Object.keys(queryAttributes).join(", ");

export interface TemplateQuery {
  // 0 means 1.
  page: number;
  // 0 means DEFAULT_PAGE_SIZE.
  pageSize: number;
  filter: string;
  sortAsc: string;
  sortDesc: string;
}

export interface TemplatePage {
  templates: TemplateRecord[];
  page: number;
  pageSize: number;
  total: number;
}

interface Condition {
  read: (t: TemplateRecord) => string;
  equal: boolean;
  pattern: string;
}

export function queryTemplates(all: readonly TemplateRecord[], query: TemplateQuery): TemplatePage {
  const v = new Violations();
  // 0 is the default (proto3 cannot tell it from absent), so the messages say so: "between 1 and 128" refused 129
  // while 0 was taken (a probe of the docs, 2026-11-28). The XML surface refuses a 0 written in its query itself.
  if (query.page < 0) v.add("page", `must be 1 or more (0 or none is the first page), got ${query.page}`);
  if (query.pageSize < 0 || query.pageSize > MAX_PAGE_SIZE) {
    v.add("pageSize", `must be from 1 to ${MAX_PAGE_SIZE} (0 or none is ${DEFAULT_PAGE_SIZE}), got ${query.pageSize}`);
  }
  const conditions = parseFilter(query.filter, v);
  if (query.sortAsc !== "" && query.sortDesc !== "") v.add("sortDesc", "give sortAsc or sortDesc, not both");
  const sortBy = query.sortDesc !== "" ? query.sortDesc : query.sortAsc === "" ? "name" : query.sortAsc;
  const sortField = query.sortDesc !== "" ? "sortDesc" : "sortAsc";
  const sortKey = queryAttributes[sortBy];
  if (sortKey === undefined || !Object.hasOwn(queryAttributes, sortBy)) v.add(sortField, `must be one of ${attributeNames}, got ${JSON.stringify(sortBy)}`);
  v.throwIfAny();

  const page = query.page === 0 ? 1 : query.page;
  const pageSize = query.pageSize === 0 ? DEFAULT_PAGE_SIZE : query.pageSize;
  const matching = all.filter((t) => conditions.every((c) => matches(c.read(t), c.pattern) === c.equal));
  const direction = query.sortDesc !== "" ? -1 : 1;
  const sorted = [...matching].sort((a, b) => direction * compare(sortKey!(a), sortKey!(b)) || compare(a.id, b.id));
  const lastPage = Math.max(1, Math.ceil(sorted.length / pageSize));
  if (page > lastPage) {
    const out = new Violations();
    out.add("page", `must be at most ${lastPage}, the last page of ${sorted.length} records at ${pageSize} a page; got ${page}`);
    out.throwIfAny();
  }
  return { templates: sorted.slice((page - 1) * pageSize, page * pageSize), page, pageSize, total: sorted.length };
}

// `attribute==value` and `attribute!=value` joined by `;` (and). VCD's `,` (or) and its parentheses are not
// supported: a comma is refused rather than read as part of a value, which answered such a filter with no records.
function parseFilter(filter: string, v: Violations): Condition[] {
  if (filter === "") return [];
  if (filter.includes(",")) {
    v.add("filter", "',' (or) is not supported: conditions are attribute==value or attribute!=value, joined by ';' (and); to match a value that holds a comma, write * in its place");
    return [];
  }
  const conditions: Condition[] = [];
  for (const part of filter.split(";")) {
    const eq = part.indexOf("==");
    const ne = part.indexOf("!=");
    const at = eq >= 0 && (ne < 0 || eq < ne) ? eq : ne;
    if (at <= 0) {
      v.add("filter", `each condition is attribute==value or attribute!=value, joined by ';'; got ${JSON.stringify(part)}`);
      continue;
    }
    const name = part.slice(0, at);
    const read = Object.hasOwn(queryAttributes, name) ? queryAttributes[name] : undefined;
    if (read === undefined) {
      v.add("filter", `unknown attribute ${JSON.stringify(name)}; allowed: ${attributeNames}`);
      continue;
    }
    let pattern = part.slice(at + 2);
    // A vDC may be named by its href, as the records show it: https://<site>/api/vdc/<id>.
    if (name === "vdc") pattern = pattern.slice(pattern.lastIndexOf("/") + 1);
    conditions.push({ read, equal: at === eq, pattern });
  }
  return conditions;
}

// Case-insensitive match where `*` stands for any characters (none included).
export function matches(value: string, pattern: string): boolean {
  const text = value.toLowerCase();
  const parts = pattern.toLowerCase().split("*");
  if (parts.length === 1) return text === parts[0];
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  if (!text.startsWith(first) || text.length < first.length + last.length || !text.endsWith(last)) return false;
  let at = first.length;
  const end = text.length - last.length;
  for (const middle of parts.slice(1, -1)) {
    const found = text.indexOf(middle, at);
    if (found < 0 || found + middle.length > end) return false;
    at = found + middle.length;
  }
  return true;
}

function compare(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  return x < y ? -1 : x > y ? 1 : a < b ? -1 : a > b ? 1 : 0;
}
