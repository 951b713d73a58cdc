import { create } from "@bufbuild/protobuf";
import { ConfigBaseResponseSchema, SparkConfigsResponseSchema } from "../../../gen/compute/configs/v2/configs_pb.js";
import type { ConfigService } from "../../../gen/compute/configs/v2/configs_pb.js";
import { quoted } from "../../errors/caller-text.js";
import { invalidArgument } from "../../errors/domain-error.js";
import type { ServiceHandlers } from "../../pipeline/handlers.js";
import type { Catalog, ClusterType } from "../catalog/catalog.js";
import { clusterTypes } from "../catalog/catalog.js";
import { instanceConfigsToProto, sparkConfigToProto } from "./config-to-proto.js";

// The configuration calls of the platform's public API v2: what callers can run, straight from the catalog. The
// messages are built once at start, since the catalog does not change while the server runs.
export function createConfigService(catalog: Catalog): ServiceHandlers<typeof ConfigService> {
  const byType = new Map(clusterTypes.map((type) => [type, create(ConfigBaseResponseSchema, instanceConfigsToProto(catalog.instanceConfigs[type]))]));
  const spark = create(SparkConfigsResponseSchema, { configs: catalog.sparkConfigs.map(sparkConfigToProto) });
  return {
    listConfigs(req) {
      return byType.get(clusterTypeOf(req.clusterType))!;
    },
    listSparkConfigs() {
      return spark;
    },
  };
}

// cluster_type exactly as the document writes it: MT or INF, upper case.
function clusterTypeOf(given: string): ClusterType {
  const found = clusterTypes.find((type) => type === given);
  if (found !== undefined) return found;
  const allowed = `must be one of ${clusterTypes.join(", ")} (MT: training and Jupyter servers, INF: deployments)`;
  const description = given === "" ? `is required and ${allowed}` : `${allowed}, got ${quoted(given)}`;
  throw invalidArgument("compute", [{ field: "cluster_type", description }]);
}
