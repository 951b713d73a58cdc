import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import { KeyManagerService } from "../gen/kms/v1/kms_pb.js";
import { NodePoolService } from "../gen/compute/cluster/v1/node_pool_pb.js";
import { TaskService } from "../gen/compute/cluster/v1/task_pb.js";
import { Health } from "../gen/grpc/health/v1/health_pb.js";
import { ServerReflection as ServerReflectionV1 } from "../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1alpha } from "../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { createHealthService } from "./transport/grpc/health-service.js";
import type { HealthStatus } from "./transport/grpc/health-service.js";
import { createReflectionServices } from "./transport/grpc/reflection-service.js";

// The product's services: served on every protocol, REST included.
export const apiServices: DescService[] = [KeyManagerService, NodePoolService, TaskService];

// Calls that stay open (health watches, reflection streams): they do not hold up a graceful shutdown.
export const longLivedPaths = new Set([
  `/${Health.typeName}/Watch`,
  `/${ServerReflectionV1.typeName}/ServerReflectionInfo`,
  `/${ServerReflectionV1alpha.typeName}/ServerReflectionInfo`,
]);

export interface ServiceImpls {
  kms: ServiceImpl<typeof KeyManagerService>;
  nodePools: ServiceImpl<typeof NodePoolService>;
  tasks: ServiceImpl<typeof TaskService>;
  health: HealthStatus;
}

// Registers every service on the router in one place.
export function registerRoutes(router: ConnectRouter, impls: ServiceImpls): void {
  router.service(KeyManagerService, impls.kms);
  router.service(NodePoolService, impls.nodePools);
  router.service(TaskService, impls.tasks);
  const reflection = createReflectionServices([...apiServices, Health, ServerReflectionV1, ServerReflectionV1alpha]);
  router.service(Health, createHealthService(impls.health));
  router.service(ServerReflectionV1, reflection.v1);
  router.service(ServerReflectionV1alpha, reflection.v1alpha);
  // Health reports every service the router serves, named by its descriptor.
  impls.health.register(router.handlers.map((handler) => handler.service));
}
