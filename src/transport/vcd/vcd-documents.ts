import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { VAppTask_Status } from "../../../gen/compute/vapp/v1/vapp_pb.js";
import type { ListVAppTemplatesResponse, VApp, VAppTask, VAppTemplate } from "../../../gen/compute/vapp/v1/vapp_pb.js";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { VCLOUD_NS, minorErrorCodeOf, xmlDocument } from "./vcd-xml.js";

// The virtualization API's response documents, written from VAppService's messages: the attributes and child
// elements of VCD's schema (QueryResultRecordsType, VAppType, TaskType), children in the schema's order.

export const MEDIA = {
  records: "application/vnd.vmware.vcloud.query.records+xml",
  vapp: "application/vnd.vmware.vcloud.vApp+xml",
  task: "application/vnd.vmware.vcloud.task+xml",
  vdc: "application/vnd.vmware.vcloud.vdc+xml",
  vAppTemplate: "application/vnd.vmware.vcloud.vAppTemplate+xml",
} as const;

const OVF_NS = "http://schemas.dmtf.org/ovf/envelope/1";

// The parts of a URL this server writes: https://<site>.
export interface Site {
  base: string;
}

export function vappHref(site: Site, id: string): string {
  return `${site.base}/api/vApp/vapp-${id}`;
}

export function taskHref(site: Site, id: string): string {
  return `${site.base}/api/task/${id}`;
}

function vdcHref(site: Site, id: string): string {
  return `${site.base}/api/vdc/${id}`;
}

function iso(ts: Timestamp | undefined): string | undefined {
  return ts === undefined ? undefined : timestampDate(ts).toISOString();
}

export interface RecordsPage {
  response: ListVAppTemplatesResponse;
  // The query's own href, and the href of the same query at another page.
  href: string;
  pageHref: (page: number) => string;
}

export function queryRecordsDocument(site: Site, page: RecordsPage): string {
  const { response } = page;
  const lastPage = Math.max(1, Math.ceil(response.total / response.pageSize));
  const links: Record<string, string>[] = [];
  const link = (rel: string, n: number): void => {
    links.push({ "@_rel": rel, "@_href": page.pageHref(n), "@_type": MEDIA.records });
  };
  if (response.page < lastPage) link("nextPage", response.page + 1);
  if (response.page > 1) link("previousPage", response.page - 1);
  if (response.page > 1) link("firstPage", 1);
  if (response.page < lastPage) link("lastPage", lastPage);
  return xmlDocument("QueryResultRecords", {
    "@_xmlns": VCLOUD_NS,
    "@_name": "vAppTemplate",
    "@_page": String(response.page),
    "@_pageSize": String(response.pageSize),
    "@_total": String(response.total),
    "@_href": page.href,
    "@_type": MEDIA.records,
    Link: links,
    VAppTemplateRecord: response.templates.map((t) => templateRecord(site, t)),
  });
}

function templateRecord(site: Site, t: VAppTemplate): Record<string, string> {
  return {
    "@_name": t.name,
    "@_href": t.href,
    "@_id": `urn:vcloud:vapptemplate:${t.id}`,
    "@_catalogName": t.catalogName,
    "@_vdc": vdcHref(site, t.serviceInstanceId),
    "@_vdcName": t.vdcName,
    "@_ownerName": t.ownerName,
    "@_status": t.status,
    "@_isDeployed": String(t.isDeployed),
    "@_isGoldMaster": String(t.isGoldMaster),
    "@_isEnabled": String(t.isEnabled),
    "@_storageProfileName": t.storageProfileName,
  };
}

export function vappDocument(site: Site, v: VApp): string {
  return xmlDocument("VApp", {
    "@_xmlns": VCLOUD_NS,
    "@_xmlns:ovf": OVF_NS,
    "@_ovfDescriptorUploaded": "true",
    "@_deployed": String(v.deployed),
    "@_status": String(v.status),
    "@_name": v.name,
    "@_id": `urn:vcloud:vapp:${v.id}`,
    "@_href": vappHref(site, v.id),
    "@_type": MEDIA.vapp,
    Link: [{ "@_rel": "up", "@_href": vdcHref(site, v.serviceInstanceId), "@_type": MEDIA.vdc }],
    ...(v.description === "" ? {} : { Description: v.description }),
    ...(v.tasks.length === 0 ? {} : { Tasks: { Task: v.tasks.map((t) => taskElement(site, t)) } }),
    NetworkConfigSection: {
      "ovf:Info": "The configuration parameters for logical networks",
      NetworkConfig: { "@_networkName": v.networkName },
    },
    DateCreated: iso(v.createdAt),
    Owner: { User: { "@_name": v.createdBy, "@_type": "application/vnd.vmware.admin.user+xml" } },
    InMaintenanceMode: "false",
  });
}

export function taskDocument(site: Site, t: VAppTask): string {
  return xmlDocument("Task", { "@_xmlns": VCLOUD_NS, ...taskElement(site, t) });
}

const taskStatusNames: Record<VAppTask_Status, string> = {
  [VAppTask_Status.STATUS_UNSPECIFIED]: "queued",
  [VAppTask_Status.QUEUED]: "queued",
  [VAppTask_Status.RUNNING]: "running",
  [VAppTask_Status.SUCCESS]: "success",
  [VAppTask_Status.ERROR]: "error",
};

function taskElement(site: Site, t: VAppTask): Record<string, unknown> {
  const done = t.status === VAppTask_Status.SUCCESS || t.status === VAppTask_Status.ERROR;
  return {
    "@_status": taskStatusNames[t.status],
    "@_startTime": iso(t.startTime),
    ...(t.endTime === undefined ? {} : { "@_endTime": iso(t.endTime) }),
    "@_serviceNamespace": "com.vmware.vcloud",
    "@_operationName": t.operationName,
    "@_operation": t.operation,
    "@_cancelRequested": "false",
    "@_name": "task",
    "@_id": `urn:vcloud:task:${t.id}`,
    "@_href": taskHref(site, t.id),
    "@_type": MEDIA.task,
    Owner: { "@_href": vappHref(site, t.vappId), "@_name": t.vappName, "@_type": MEDIA.vapp },
    ...(t.error === undefined ? {} : { Error: taskError(t) }),
    User: { "@_name": t.createdBy, "@_type": "application/vnd.vmware.admin.user+xml" },
    Progress: done ? "100" : "0",
  };
}

// A failed task's google.rpc.Status as the Error element of the task.
function taskError(t: VAppTask): Record<string, string> {
  const status = t.error!;
  const info = status.details.map((d) => anyUnpack(d, ErrorInfoSchema)).find((x) => x !== undefined);
  return {
    "@_majorErrorCode": "500",
    "@_minorErrorCode": minorErrorCodeOf(500),
    "@_message": status.message,
    ...(info === undefined ? {} : { "@_vendorSpecificErrorCode": info.reason }),
  };
}
