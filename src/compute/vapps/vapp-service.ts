import type { VAppService } from "../../../gen/compute/vapp/v1/vapp_pb.js";
import { emptyHost } from "../../errors/protocol-errors.js";
import type { Call } from "../../pipeline/call.js";
import type { ServiceHandlers } from "../../pipeline/handlers.js";
import type { VAppManager } from "./vapp-manager.js";
import { templateToProto, vappTaskToProto, vappToProto } from "./vapp-to-proto.js";

// The host the caller sent the request to (Host, or :authority over HTTP/2; every adapter's headers answer both
// names): template hrefs are made with it, and a Source href must name it. An empty Host is refused (emptyHost): every
// href was written "https:///api/..." (a probe, 2026-11-28).
function siteOf(call: Call): string {
  const site = call.headers.get("host") ?? call.headers.get(":authority") ?? "localhost";
  if (site === "") throw emptyHost("compute");
  return site;
}

// The transport side of vApps: unpacks requests for the VAppManager and packs its records into messages. The
// virtualization API's XML adapter calls these same handlers through the pipeline.
export function createVAppService(vapps: VAppManager): ServiceHandlers<typeof VAppService> {
  return {
    listVAppTemplates(req, call) {
      const page = vapps.listTemplates(req.serviceInstanceId, {
        page: req.page,
        pageSize: req.pageSize,
        filter: req.filter,
        sortAsc: req.sortAsc,
        sortDesc: req.sortDesc,
      });
      const site = siteOf(call);
      return { templates: page.templates.map((t) => templateToProto(t, site)), page: page.page, pageSize: page.pageSize, total: page.total };
    },

    async instantiateVAppTemplate(req, call) {
      const { vapp, task } = await vapps.instantiate({
        serviceInstanceId: req.serviceInstanceId,
        name: req.name,
        description: req.description,
        source: req.source,
        site: siteOf(call),
        networkName: req.networkName,
        deploy: req.deploy,
        powerOn: req.powerOn,
        allEulasAccepted: req.allEulasAccepted,
        createdBy: call.principal,
      });
      return vappToProto(vapp, task);
    },

    async getVApp(req) {
      const { vapp, task } = await vapps.get(req.vappId);
      return vappToProto(vapp, task);
    },

    async getVAppTask(req) {
      return vappTaskToProto(await vapps.getTask(req.taskId));
    },
  };
}
