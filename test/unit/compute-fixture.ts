import { randomUUID } from "node:crypto";
import type Database from "better-sqlite3";
import { pino } from "pino";
import type { Logger } from "pino";
import type { Catalog } from "../../src/compute/catalog/catalog.js";
import { NodePoolManager } from "../../src/compute/node-pools/node-pool-manager.js";
import { NodePoolTaskRunner } from "../../src/compute/node-pools/node-pool-task-runner.js";
import type { NodePoolProvider } from "../../src/compute/node-pools/provider.js";
import { SimulatedProvider } from "../../src/compute/node-pools/simulated-provider.js";
import { TaskManager } from "../../src/compute/tasks/task-manager.js";
import { TaskNotifier } from "../../src/compute/tasks/task-notifier.js";
import { TaskWorker } from "../../src/compute/tasks/task-worker.js";
import type { TaskWorkerSettings } from "../../src/compute/tasks/task-worker.js";
import type { TaskRecord } from "../../src/compute/tasks/task-model.js";
import { DomainError } from "../../src/errors/domain-error.js";
import type { DomainErrorKind } from "../../src/errors/domain-error.js";
import type { Clock } from "../../src/shared/clock.js";
import { openDatabase } from "../../src/storage/sqlite/database.js";
import { SqliteComputeStore } from "../../src/storage/sqlite/sqlite-compute-store.js";
import { SqliteNodeLedger } from "../../src/storage/sqlite/sqlite-node-ledger.js";

// A small catalog with numbers the tests reason about: cl-a1 holds 10 nodes but lets one pool ask for 20, so
// capacity failures happen at provisioning time; gpu.sold-out is known but unavailable.
export const testCatalog: Catalog = {
  computeFlavors: [
    { id: "cpu.small", description: "", cpu: 2, memoryGiB: 8, diskGiB: 50, gpu: 0, gpuModel: "", available: true },
    { id: "gpu.sold-out", description: "", cpu: 8, memoryGiB: 64, diskGiB: 200, gpu: 1, gpuModel: "V100", available: false },
  ],
  serviceInstances: [
    {
      id: "vdc-a",
      name: "a",
      clusters: [
        { id: "cl-a1", name: "a1", capacity: 10, maxPoolSize: 20 },
        { id: "cl-a2", name: "a2", capacity: 100, maxPoolSize: 8 },
      ],
      orgNetworks: [],
      vAppTemplates: [],
    },
    { id: "vdc-b", name: "b", clusters: [{ id: "cl-b1", name: "b1", capacity: 4, maxPoolSize: 4 }], orgNetworks: [], vAppTemplates: [] },
  ],
  instanceConfigs: { MT: { regions: [], datahubImages: [], customImages: [] }, INF: { regions: [], datahubImages: [], customImages: [] } },
  sparkConfigs: [],
};

export const silentLogger: Logger = pino({ level: "silent" });

export interface ComputeStack {
  db: Database.Database;
  store: SqliteComputeStore;
  ledger: SqliteNodeLedger;
  notifier: TaskNotifier;
  worker: TaskWorker<TaskRecord>;
  manager: NodePoolManager;
  tasks: TaskManager;
}

export interface StackOptions {
  clock: Clock;
  // The simulated provider with no delay unless given.
  provider?: (ledger: SqliteNodeLedger, db: Database.Database) => NodePoolProvider;
  worker?: Partial<TaskWorkerSettings>;
  logger?: Logger;
}

// The pieces of the compute module wired as createComputeModule wires them, on its own connection to the
// database in `dir`, with fakes where a test needs them. The worker is not started.
export function computeStack(dir: string, opts: StackOptions): ComputeStack {
  const db = openDatabase(dir, "upgrade");
  const store = new SqliteComputeStore(db);
  const ledger = new SqliteNodeLedger(db);
  const logger = opts.logger ?? silentLogger;
  const provider = opts.provider?.(ledger, db) ?? new SimulatedProvider(ledger, testCatalog, { delayPerNodeMs: 0 });
  const notifier = new TaskNotifier();
  const runner = new NodePoolTaskRunner(store, provider, opts.clock, logger);
  const worker = new TaskWorker(
    store,
    async (task, workerId, signal) => {
      const finished = await runner.run(task, workerId, signal);
      if (finished !== null) notifier.notify(finished.id);
    },
    opts.clock,
    logger,
    { workerId: randomUUID(), concurrency: 4, heartbeatMs: 3_600_000, leaseMs: 5000, ...opts.worker },
  );
  const manager = new NodePoolManager(store, testCatalog, opts.clock, () => worker.kick());
  return { db, store, ledger, notifier, worker, manager, tasks: new TaskManager(store, testCatalog, notifier) };
}

// Nodes the simulated provider holds in a cluster, read straight from its table.
export function reservedIn(db: Database.Database, clusterId: string): number {
  return db.prepare("SELECT COALESCE(SUM(reserved), 0) FROM compute_simulated_nodes WHERE cluster_id = ?").pluck().get(clusterId) as number;
}

// The domain error a call fails with, or a description of what happened instead, for compact assertions.
export async function domainError(fn: () => Promise<unknown>): Promise<DomainErrorKind> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof DomainError) return err.detail;
    throw err;
  }
  throw new Error("expected a domain error, the call succeeded");
}

// The signal of a caller that never goes away.
export function never(): AbortSignal {
  return new AbortController().signal;
}
