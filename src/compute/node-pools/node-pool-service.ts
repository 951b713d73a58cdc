import type { ServiceImpl } from "@connectrpc/connect";
import type { NodePoolService } from "../../../gen/compute/cluster/v1/node_pool_pb.js";
import { principalKey } from "../../transport/context.js";
import { taskToProto } from "../tasks/task-to-proto.js";
import type { NodePoolManager } from "./node-pool-manager.js";
import { nodePoolToProto } from "./node-pool-to-proto.js";

// The transport side of node pools: unpacks requests for the NodePoolManager and packs its records into
// messages. Every rule lives in the manager.
export function createNodePoolService(manager: NodePoolManager): ServiceImpl<typeof NodePoolService> {
  return {
    async listNodePools(req) {
      const pools = await manager.list(req.serviceInstanceId, req.clusterId);
      return { nodePools: pools.map(nodePoolToProto) };
    },

    async getNodePool(req) {
      return { nodePool: nodePoolToProto(await manager.get(req.serviceInstanceId, req.nodePoolId)) };
    },

    async createNodePool(req, context) {
      const task = await manager.create({
        serviceInstanceId: req.serviceInstanceId,
        clusterId: req.clusterId,
        computeFlavor: req.nodeConfig?.computeFlavor ?? "",
        name: req.nodePoolName,
        count: req.scalePolicy?.fixedScale?.count,
        createdBy: context.values.get(principalKey),
      });
      return { task: taskToProto(task) };
    },

    async updateNodePool(req, context) {
      const task = await manager.update({
        serviceInstanceId: req.serviceInstanceId,
        nodePoolId: req.nodePoolId,
        name: req.nodePoolName,
        count: req.scalePolicy?.fixedScale?.count,
        createdBy: context.values.get(principalKey),
      });
      return { task: taskToProto(task) };
    },

    async deleteNodePool(req, context) {
      const task = await manager.delete({
        serviceInstanceId: req.serviceInstanceId,
        nodePoolId: req.nodePoolId,
        createdBy: context.values.get(principalKey),
      });
      return { task: taskToProto(task) };
    },
  };
}
