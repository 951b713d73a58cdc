import { create } from "@bufbuild/protobuf";
import { NodePool_State, NodePoolSchema } from "../../../gen/compute/cluster/v1/node_pool_pb.js";
import type { NodePool } from "../../../gen/compute/cluster/v1/node_pool_pb.js";
import type { NodePoolRecord } from "./node-pool-model.js";

export function nodePoolToProto(p: NodePoolRecord): NodePool {
  return create(NodePoolSchema, {
    nodePoolId: p.id,
    clusterId: p.clusterId,
    name: p.name,
    nodeConfig: { computeFlavor: p.computeFlavor },
    scalePolicy: { fixedScale: { count: p.count } },
    state: NodePool_State[p.state],
  });
}
