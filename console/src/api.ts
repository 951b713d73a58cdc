import { createClient } from "@connectrpc/connect";
import type { Client, Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { createRegistry } from "@bufbuild/protobuf";
import { NodePoolService, file_compute_cluster_v1_node_pool } from "../../gen/compute/cluster/v1/node_pool_pb.js";
import { TaskService } from "../../gen/compute/cluster/v1/task_pb.js";
import { file_google_rpc_error_details } from "../../gen/google/rpc/error_details_pb.js";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";

export interface Api {
  kms: Client<typeof KeyManagerService>;
  pools: Client<typeof NodePoolService>;
  tasks: Client<typeof TaskService>;
}

// Clients of the server that served this page, over the Connect protocol (JSON), each call carrying the token.
// The registry lets Connect's JSON read the google.protobuf.Any of tasks ({"@type": ...}).
export function createApi(token: string): Api {
  const authorization: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  const transport = createConnectTransport({
    baseUrl: location.origin,
    interceptors: [authorization],
    jsonOptions: { registry: createRegistry(file_compute_cluster_v1_node_pool, file_google_rpc_error_details) },
  });
  return { kms: createClient(KeyManagerService, transport), pools: createClient(NodePoolService, transport), tasks: createClient(TaskService, transport) };
}
