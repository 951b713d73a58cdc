import { randomUUID } from "node:crypto";
import { createRegistry } from "@bufbuild/protobuf";
import type { Registry } from "@bufbuild/protobuf";
import type { ServiceHandlers } from "../pipeline/handlers.js";
import type { Logger } from "pino";
import { file_compute_cluster_v1_node_pool } from "../../gen/compute/cluster/v1/node_pool_pb.js";
import type { NodePoolService } from "../../gen/compute/cluster/v1/node_pool_pb.js";
import type { ConfigService } from "../../gen/compute/configs/v2/configs_pb.js";
import type { TaskService } from "../../gen/compute/cluster/v1/task_pb.js";
import type { VAppService } from "../../gen/compute/vapp/v1/vapp_pb.js";
import { file_google_rpc_error_details } from "../../gen/google/rpc/error_details_pb.js";
import type { Clock } from "../shared/clock.js";
import type { ComputeStore } from "../storage/compute-store.js";
import type { NodeLedger } from "../storage/node-ledger.js";
import type { VAppStore } from "../storage/vapp-store.js";
import type { Catalog } from "./catalog/catalog.js";
import { createConfigService } from "./configs/config-service.js";
import { NodePoolManager } from "./node-pools/node-pool-manager.js";
import { createNodePoolService } from "./node-pools/node-pool-service.js";
import { NodePoolTaskRunner } from "./node-pools/node-pool-task-runner.js";
import { SimulatedProvider } from "./node-pools/simulated-provider.js";
import { TaskManager } from "./tasks/task-manager.js";
import { TaskNotifier } from "./tasks/task-notifier.js";
import { createTaskService } from "./tasks/task-service.js";
import { CombinedQueue } from "./tasks/combined-queue.js";
import type { TaskRecord } from "./tasks/task-model.js";
import { TaskWorker } from "./tasks/task-worker.js";
import type { VAppTaskRecord } from "./vapps/vapp-model.js";
import type { VAppScopes } from "../pipeline/stages/authorization.js";
import { vappNotFound, vappTaskNotFound } from "./vapps/vapp-errors.js";
import { VAppManager } from "./vapps/vapp-manager.js";
import { createVAppService } from "./vapps/vapp-service.js";
import { VAppTaskRunner } from "./vapps/vapp-task-runner.js";
import { templatesOf } from "./vapps/vapp-templates.js";

// Every type a compute response packs into google.protobuf.Any: task metadata and response, and the error details
// of task.error. Connect's JSON codec needs them to write (and a Connect JSON client to read) the canonical
// {"@type": ...} form.
export const computeJsonRegistry: Registry = createRegistry(file_compute_cluster_v1_node_pool, file_google_rpc_error_details);

export interface ComputeModuleDeps {
  store: ComputeStore;
  // vApps made from templates, and their tasks.
  vapps: VAppStore;
  // The simulated provider's inventory.
  ledger: NodeLedger;
  clock: Clock;
  logger: Logger;
  catalog: Catalog;
  // Time the simulated provider takes per node brought up or down, and to build a vApp.
  providerDelayMs: number;
  // Node pool tasks run at the same time by this process.
  taskConcurrency: number;
}

export interface ComputeModule {
  configService: ServiceHandlers<typeof ConfigService>;
  nodePoolService: ServiceHandlers<typeof NodePoolService>;
  taskService: ServiceHandlers<typeof TaskService>;
  // The PENDING and RUNNING tasks, for /metrics.
  taskQueue: ComputeStore["taskQueue"];
  vappService: ServiceHandlers<typeof VAppService>;
  // What the authorization stage reads to find the vDC of a vApp or task named by id.
  vappScopes: VAppScopes;
  // Starts the worker, which first resumes the tasks left unfinished by an earlier run.
  start(): void;
  // Another server stored a task: look for work now rather than at the next heartbeat.
  kick(): void;
  // Another server finished a task: wake its waiters here.
  taskFinished(taskId: string): void;
  // Answers every WaitTask at once, stops taking tasks, and waits for the running ones to reach a safe point;
  // they are resumed by the next start. Call it before closing the database.
  stop(): Promise<void>;
}

// A worker that misses five heartbeats is taken for dead; its tasks resume elsewhere (or after a restart) within
// about five seconds.
const HEARTBEAT_MS = 1000;
const LEASE_MS = 5000;

export function createComputeModule(deps: ComputeModuleDeps): ComputeModule {
  const logger = deps.logger.child({ component: "compute" });
  const store = deps.store;
  const provider = new SimulatedProvider(deps.ledger, deps.catalog, { delayPerNodeMs: deps.providerDelayMs });
  const notifier = new TaskNotifier();
  const runner = new NodePoolTaskRunner(store, provider, deps.clock, logger);
  // vApp creation tasks: a queue of their own, taken by the same worker as node pool tasks.
  const vappStore = deps.vapps;
  const vappRunner = new VAppTaskRunner(vappStore, deps.clock, logger, { buildDelayMs: deps.providerDelayMs });
  const worker = new TaskWorker<TaskRecord | VAppTaskRecord>(
    new CombinedQueue<TaskRecord | VAppTaskRecord>(store, [store, vappStore]),
    async (task, workerId, signal) => {
      if (task.command === "InstantiateVAppTemplate") {
        await vappRunner.run(task, workerId, signal);
        return;
      }
      const finished = await runner.run(task, workerId, signal);
      if (finished !== null) notifier.notify(finished.id);
    },
    deps.clock,
    logger,
    { workerId: randomUUID(), concurrency: deps.taskConcurrency, heartbeatMs: HEARTBEAT_MS, leaseMs: LEASE_MS },
  );
  const manager = new NodePoolManager(store, deps.catalog, deps.clock, () => worker.kick());
  const vapps = new VAppManager(vappStore, deps.catalog, templatesOf(deps.catalog), deps.clock, () => worker.kick());
  return {
    configService: createConfigService(deps.catalog),
    nodePoolService: createNodePoolService(manager),
    taskService: createTaskService(new TaskManager(store, deps.catalog, notifier)),
    taskQueue: () => store.taskQueue(),
    vappService: createVAppService(vapps),
    vappScopes: {
      serviceInstanceOfVApp: (id) => vapps.serviceInstanceOfVApp(id),
      serviceInstanceOfTask: (id) => vapps.serviceInstanceOfTask(id),
      vappNotFound,
      taskNotFound: vappTaskNotFound,
    },
    start: () => worker.start(),
    kick: () => worker.kick(),
    taskFinished: (taskId) => notifier.notify(taskId),
    async stop() {
      notifier.close();
      await worker.stop();
    },
  };
}
