import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { AuthService } from "../gen/compute/auth/v2/auth_pb.js";
import { ConfigService } from "../gen/compute/configs/v2/configs_pb.js";
import { KeyManagerService } from "../gen/kms/v1/kms_pb.js";
import { NodePoolService } from "../gen/compute/cluster/v1/node_pool_pb.js";
import { TaskService } from "../gen/compute/cluster/v1/task_pb.js";
import { VAppService } from "../gen/compute/vapp/v1/vapp_pb.js";
import { Health } from "../gen/grpc/health/v1/health_pb.js";
import { ServerReflection as ServerReflectionV1 } from "../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1alpha } from "../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { servedService } from "./pipeline/handlers.js";
import type { ServedService, ServiceHandlers } from "./pipeline/handlers.js";
import type { MethodTable } from "./pipeline/method-table.js";
import { connectImplOf } from "./transport/connect/connect-services.js";
import { createHealthService } from "./transport/grpc/health-service.js";
import type { HealthStatus } from "./transport/grpc/health-service.js";
import { createReflectionServices } from "./transport/grpc/reflection-service.js";

// The product's services: served on every protocol, REST included.
export const apiServices: DescService[] = [AuthService, KeyManagerService, ConfigService, NodePoolService, TaskService, VAppService];

// gRPC's own services, which only Connect serves (their calls still run through the pipeline, by its
// interceptor).
export const infrastructureServices: DescService[] = [Health, ServerReflectionV1, ServerReflectionV1alpha];

export interface ServiceHandlerSet {
  auth: ServiceHandlers<typeof AuthService>;
  kms: ServiceHandlers<typeof KeyManagerService>;
  configs: ServiceHandlers<typeof ConfigService>;
  nodePools: ServiceHandlers<typeof NodePoolService>;
  tasks: ServiceHandlers<typeof TaskService>;
  vapps: ServiceHandlers<typeof VAppService>;
}

export function servedServices(handlers: ServiceHandlerSet): ServedService[] {
  return [
    servedService(AuthService, handlers.auth),
    servedService(KeyManagerService, handlers.kms),
    servedService(ConfigService, handlers.configs),
    servedService(NodePoolService, handlers.nodePools),
    servedService(TaskService, handlers.tasks),
    servedService(VAppService, handlers.vapps),
  ];
}

// Calls that stay open by design (streams whose policy says long_running: health watches, reflection): they do
// not hold up a graceful shutdown, nor are they held to the time a request has to arrive.
export function longLivedPaths(table: MethodTable): Set<string> {
  const paths = new Set<string>();
  for (const entry of table.entries()) {
    if (entry.policy.longRunning && entry.method.methodKind !== "unary") paths.add(entry.path);
  }
  return paths;
}

// Registers every service on the router in one place.
export function registerRoutes(router: ConnectRouter, served: readonly ServedService[], health: HealthStatus): void {
  // connectImplOf checks each method's handler against the descriptor at run time; Connect's ServiceImpl type
  // cannot express an implementation of a service known only as a DescService, hence the cast.
  for (const s of served) router.service(s.service, connectImplOf(s) as never);
  const reflection = createReflectionServices([...apiServices, ...infrastructureServices]);
  router.service(Health, createHealthService(health));
  router.service(ServerReflectionV1, reflection.v1);
  router.service(ServerReflectionV1alpha, reflection.v1alpha);
  // Health reports every service the router serves, named by its descriptor.
  health.register(router.handlers.map((handler) => handler.service));
}
