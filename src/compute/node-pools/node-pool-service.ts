import type { NodePoolService } from "../../../gen/compute/cluster/v1/node_pool_pb.js";
import type { ServiceHandlers } from "../../pipeline/handlers.js";
import { taskToProto } from "../tasks/task-to-proto.js";
import type { NodePoolManager } from "./node-pool-manager.js";
import { nodePoolToProto } from "./node-pool-to-proto.js";

// The transport side of node pools: unpacks requests for the NodePoolManager and packs its records into
// messages. Every rule lives in the manager.
export function createNodePoolService(manager: NodePoolManager): ServiceHandlers<typeof NodePoolService> {
  return {
    async listNodePools(req) {
      const pools = await manager.list(req.serviceInstanceId, req.clusterId);
      return { nodePools: pools.map(nodePoolToProto) };
    },

    async getNodePool(req) {
      return { nodePool: nodePoolToProto(await manager.get(req.serviceInstanceId, req.nodePoolId)) };
    },

    async createNodePool(req, call) {
      const task = await manager.create({
        serviceInstanceId: req.serviceInstanceId,
        clusterId: req.clusterId,
        computeFlavor: req.nodeConfig?.computeFlavor ?? "",
        name: req.nodePoolName,
        count: req.scalePolicy?.fixedScale?.count,
        createdBy: call.principal,
      });
      return { task: taskToProto(task) };
    },

    async updateNodePool(req, call) {
      const task = await manager.update({
        serviceInstanceId: req.serviceInstanceId,
        nodePoolId: req.nodePoolId,
        name: req.nodePoolName,
        count: req.scalePolicy?.fixedScale?.count,
        createdBy: call.principal,
      });
      return { task: taskToProto(task) };
    },

    async deleteNodePool(req, call) {
      const task = await manager.delete({
        serviceInstanceId: req.serviceInstanceId,
        nodePoolId: req.nodePoolId,
        createdBy: call.principal,
      });
      return { task: taskToProto(task) };
    },
  };
}
