import { randomUUID } from "node:crypto";
import { holdsControlBesidesLineBreaks, isControl } from "../../shared/text.js";
import type { FieldViolation } from "../../errors/domain-error.js";
import type { Clock } from "../../shared/clock.js";
import type { VAppStore } from "../../storage/vapp-store.js";
import type { Catalog } from "../catalog/catalog.js";
import { findServiceInstance } from "../catalog/catalog.js";
import { Violations } from "../violations.js";
import { queryTemplates } from "./template-query.js";
import type { TemplatePage, TemplateQuery } from "./template-query.js";
import { serviceInstanceNotFound } from "../compute-errors.js";
import { eulaNotAccepted, invalidReferences, vappNotFound, vappTaskNotFound } from "./vapp-errors.js";
import { VAPP_STATUS } from "./vapp-model.js";
import type { VAppRecord, VAppTaskRecord } from "./vapp-model.js";
import type { TemplateRecord } from "./vapp-templates.js";

export const MAX_VAPP_NAME_CHARS = 128;
export const MAX_DESCRIPTION_CHARS = 1024;
const TEMPLATE_PATH = "/api/vAppTemplate/vappTemplate-";

export interface InstantiateInput {
  serviceInstanceId: string;
  name: string;
  description: string;
  // The template's href or id.
  source: string;
  // The host the request was sent to: a template href must be one of this site.
  site: string;
  networkName: string;
  deploy: boolean;
  powerOn: boolean;
  allEulasAccepted: boolean;
  createdBy: string;
}

export interface VAppWithTask {
  vapp: VAppRecord;
  task: VAppTaskRecord;
}

// The vApp domain: templates from the catalog, and vApps made from them. Every rule of instantiation is checked
// here, then the vApp and its task are stored in one write; the task worker builds the vApp afterwards.
export class VAppManager {
  private readonly byId: Map<string, TemplateRecord>;

  constructor(
    private readonly store: VAppStore,
    private readonly catalog: Catalog,
    private readonly templates: readonly TemplateRecord[],
    private readonly clock: Clock,
    // Tells the worker that a task is waiting.
    private readonly onTaskCreated: () => void,
  ) {
    this.byId = new Map(templates.map((t) => [t.id, t]));
  }

  // The templates of one vDC, or of every vDC when serviceInstanceId is empty (the catalogs are published to the
  // whole platform).
  listTemplates(serviceInstanceId: string, query: TemplateQuery): TemplatePage {
    if (serviceInstanceId === "") return queryTemplates(this.templates, query);
    if (findServiceInstance(this.catalog, serviceInstanceId) === undefined) throw serviceInstanceNotFound(serviceInstanceId);
    return queryTemplates(this.templates.filter((t) => t.serviceInstanceId === serviceInstanceId), query);
  }

  async instantiate(input: InstantiateInput): Promise<VAppWithTask> {
    const v = new Violations();
    v.requiredId("serviceInstanceId", input.serviceInstanceId);
    checkName(v, input.name);
    checkDescription(v, input.description);
    if (input.source === "") v.add("source", "is required: the href of a vApp template (Source href)");
    if (input.networkName === "") v.add("networkName", "is required: the name of an org network of the vDC (NetworkConfig networkName)");
    v.throwIfAny();

    const instance = findServiceInstance(this.catalog, input.serviceInstanceId);
    if (instance === undefined) throw serviceInstanceNotFound(input.serviceInstanceId);
    const bad: FieldViolation[] = [];
    const template = this.templateOf(input.source, input.site, bad);
    if (!instance.orgNetworks.some((n) => n.name === input.networkName)) {
      const names = instance.orgNetworks.map((n) => n.name).join(", ");
      bad.push({ field: "networkName", description: `vDC ${instance.id} has no org network named ${JSON.stringify(input.networkName)}; its networks: ${names === "" ? "none" : names}` });
    }
    if (bad.length > 0 || template === null) throw invalidReferences(bad);
    if (template.needsEula && !input.allEulasAccepted) throw eulaNotAccepted(template.id);

    const now = this.clock.now();
    const vappId = randomUUID();
    const taskId = randomUUID();
    const vapp: VAppRecord = {
      id: vappId,
      name: input.name,
      description: input.description,
      serviceInstanceId: instance.id,
      templateId: template.id,
      networkName: input.networkName,
      deploy: input.deploy || input.powerOn,
      powerOn: input.powerOn,
      status: VAPP_STATUS.UNRESOLVED,
      deployed: false,
      createdBy: input.createdBy,
      createdAt: now,
      modifiedAt: now,
      taskId,
    };
    const task: VAppTaskRecord = {
      id: taskId,
      command: "InstantiateVAppTemplate",
      // Running from the start, as the virtualization API reports a creation it has accepted; a worker takes it
      // at once (the store's claim takes unclaimed running tasks).
      status: "running",
      vappId,
      vappName: input.name,
      serviceInstanceId: instance.id,
      createdBy: input.createdBy,
      createdAt: now,
      endedAt: null,
      failure: null,
      attempts: 0,
    };
    await this.store.createVApp(vapp, task);
    this.onTaskCreated();
    return { vapp, task };
  }

  // The template an href of this site or a bare id names; null with a violation added when there is none.
  private templateOf(source: string, site: string, bad: FieldViolation[]): TemplateRecord | null {
    let id = source;
    if (source.includes("/")) {
      const url = URL.canParse(source) ? new URL(source) : null;
      if (url === null || url.protocol !== "https:" || url.host !== hostOf(site) || !url.pathname.startsWith(TEMPLATE_PATH) || !isPlainHref(source, url)) {
        bad.push({ field: "source", description: `${JSON.stringify(source)} is not a vApp template href of this site: https://${site}${TEMPLATE_PATH}<id>` });
        return null;
      }
      id = url.pathname.slice(TEMPLATE_PATH.length);
    }
    const template = this.byId.get(id);
    if (template === undefined) {
      bad.push({ field: "source", description: `no vApp template has the id ${JSON.stringify(id)}` });
      return null;
    }
    if (!template.isEnabled) {
      bad.push({ field: "source", description: `vApp template ${id} is disabled and cannot be instantiated` });
      return null;
    }
    return template;
  }

  // The vApp with its creation task, or null for the task once the task retention deleted it (only a finished task
  // is deleted, so the vApp reads as one whose task is done).
  async get(vappId: string): Promise<{ vapp: VAppRecord; task: VAppTaskRecord | null }> {
    const v = new Violations();
    v.requiredId("vappId", vappId);
    v.throwIfAny();
    const vapp = await this.store.getVApp(vappId);
    if (vapp === null) throw vappNotFound(vappId);
    return { vapp, task: await this.store.getVAppTask(vapp.taskId) };
  }

  async getTask(taskId: string): Promise<VAppTaskRecord> {
    const v = new Violations();
    v.requiredId("taskId", taskId);
    v.throwIfAny();
    const task = await this.store.getVAppTask(taskId);
    if (task === null) throw vappTaskNotFound(taskId);
    return task;
  }

  // For the access check: the vDC of a vApp or task named by id, null when none has it.
  async serviceInstanceOfVApp(vappId: string): Promise<string | null> {
    return (await this.store.getVApp(vappId))?.serviceInstanceId ?? null;
  }

  async serviceInstanceOfTask(taskId: string): Promise<string | null> {
    return (await this.store.getVAppTask(taskId))?.serviceInstanceId ?? null;
  }
}

// Characters as people count them, code points: an emoji is one character, not two UTF-16 units.
function characters(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    // The low half of a surrogate pair was counted with its high half.
    if (unit >= 0xdc00 && unit <= 0xdfff && i > 0 && text.charCodeAt(i - 1) >= 0xd800 && text.charCodeAt(i - 1) <= 0xdbff) continue;
    count++;
  }
  return count;
}

// 1 to 128 characters, none of them a control character. The same check for every surface: the XML one passes the
// name on as it was sent.
function checkName(v: Violations, name: string): void {
  const length = characters(name);
  if (name === "") v.add("name", "is required: the name of the new vApp");
  else if (length > MAX_VAPP_NAME_CHARS) v.add("name", `must be at most ${MAX_VAPP_NAME_CHARS} characters, got ${length}`);
  else if ([...name].some((c) => isControl(c.charCodeAt(0)))) v.add("name", "must not hold control characters");
  else if (name.trim() !== name) v.add("name", "must not begin or end with white space");
}

// At most 1024 characters; tab and line ends are text there, other control characters are not (src/shared/text.ts).
function checkDescription(v: Violations, description: string): void {
  const length = characters(description);
  if (length > MAX_DESCRIPTION_CHARS) v.add("description", `must be at most ${MAX_DESCRIPTION_CHARS} characters, got ${length}`);
  else if (holdsControlBesidesLineBreaks(description)) {
    v.add("description", "must not hold control characters other than tab and line ends");
  }
}

// The site's host as an https URL's host reads: lower case, without the default port 443, percent-encodings and IP
// literals in their canonical form. The hrefs this server writes carry the Host the caller sent as it was sent
// ("x.example:443"); compared as text with the URL's host ("x.example"), such an href of our own was refused.
// An href as this site writes one: "https://", the host (as any form of the Host names it, hostOf), then the path as
// written, with no user information, query, fragment, white space, dot segment or other form the URL parser would
// rewrite (https://u:p@host/..., https:host/..., " https://...", /api/x/../vAppTemplate/..., #frag were taken as the
// template's href; two probes, 2026-11-27).
function isPlainHref(source: string, url: URL): boolean {
  if (!source.toLowerCase().startsWith("https://") || /[\s?#@]/.test(source)) return false;
  const pathStart = source.indexOf("/", "https://".length);
  return pathStart >= 0 && source.slice(pathStart) === url.pathname;
}

function hostOf(site: string): string {
  const text = `https://${site}/`;
  return URL.canParse(text) ? new URL(text).host : site.toLowerCase();
}
