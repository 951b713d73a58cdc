import type { Logger } from "pino";
import { DomainError } from "../../errors/domain-error.js";
import { isStoreUnavailable } from "../../errors/store-unavailable.js";
import type { Clock } from "../../shared/clock.js";
import type { ComputeStore, TaskFinish } from "../../storage/compute-store.js";
import { ClaimLostError } from "../../storage/node-ledger.js";
import type { TaskFailure, TaskRecord } from "../tasks/task-model.js";
import type { NodePoolRecord, NodePoolSpec } from "./node-pool-model.js";
import type { NodePoolProvider } from "./provider.js";

// Carries out one claimed node pool task: asks the provider for the change, then records the outcome for the
// task and the pool in one transaction. Returns the finished task, or null when the run stopped early (the
// server is stopping) or the claim was lost; the task then stays RUNNING and a worker resumes it.
export class NodePoolTaskRunner {
  constructor(
    private readonly store: ComputeStore,
    private readonly provider: NodePoolProvider,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  async run(task: TaskRecord, workerId: string, signal: AbortSignal): Promise<TaskRecord | null> {
    const pool = await this.store.getNodePool(task.nodePoolId);
    let failure: TaskFailure | null = null;
    try {
      // The pool row goes only with the success of its delete task, recorded together with that task's end.
      if (pool === null) throw new Error(`node pool ${task.nodePoolId} of unfinished task ${task.id} is missing`);
      const spec = specOf(task, pool);
      const claim = { taskId: task.id, workerId };
      if (task.command === "DeleteNodePool") await this.provider.remove(spec, claim, signal);
      else await this.provider.apply(spec, claim, signal);
    } catch (err) {
      if (signal.aborted) return null;
      if (err instanceof ClaimLostError) {
        this.logger.warn({ taskId: task.id, nodePoolId: task.nodePoolId, workerId }, "another worker took over this node pool task (this one was silent past its lease); stopped running it here");
        return null;
      }
      // The store refusing for now (PostgreSQL cancelled a statement that waited past DATABASE_QUERY_TIMEOUT_SECONDS,
      // a lost connection) is not the task's failure: the run fails, and the worker runs it again later. Every task
      // caught by a 15 s lock of the database ended FAILED, INTERNAL, for good (a probe, 2026-11-28).
      if (isStoreUnavailable(err)) throw err;
      if (err instanceof DomainError) {
        failure = { kind: "domain", error: err.detail };
      } else {
        this.logger.error({ err, taskId: task.id, nodePoolId: task.nodePoolId }, "node pool task failed with an internal error");
        failure = { kind: "internal" };
      }
    }
    const now = this.clock.now();
    const finished = await this.store.finishTask(task.id, workerId, (current, currentPool) => finish(current, currentPool, failure, now));
    return finished?.task ?? null;
  }
}

// What the provider is asked for: the pool as it should be once the task is done.
function specOf(task: TaskRecord, pool: NodePoolRecord): NodePoolSpec {
  return {
    serviceInstanceId: pool.serviceInstanceId,
    clusterId: pool.clusterId,
    nodePoolId: pool.id,
    name: task.change.name ?? pool.name,
    computeFlavor: pool.computeFlavor,
    count: task.change.count ?? pool.count,
  };
}

function finish(task: TaskRecord, pool: NodePoolRecord | null, failure: TaskFailure | null, now: number): TaskFinish {
  const released = { activeTaskId: null, pendingName: null, modifiedAt: now };
  if (pool === null) {
    return { task: { ...task, status: "FAILED", modifiedAt: now, failure: failure ?? { kind: "internal" } }, pool: null };
  }
  if (failure !== null) {
    // A pool whose create failed has no nodes (the provider refuses before it places any: no room, flavor unavailable),
    // and its count, the seed's "number of nodes in the pool", says so. It said the count asked for, and a later
    // rename or shrink asked the provider for those nodes and failed for the same reason (a probe, 2026-11-28).
    const count = task.command === "CreateNodePool" ? 0 : pool.count;
    return {
      task: { ...task, status: "FAILED", modifiedAt: now, failure },
      pool: { ...pool, ...released, count, state: task.change.stateIfFailed },
    };
  }
  if (task.command === "DeleteNodePool") return { task: { ...task, status: "SUCCEEDED", modifiedAt: now }, pool: null };
  const done: NodePoolRecord = {
    ...pool,
    ...released,
    name: task.change.name ?? pool.name,
    count: task.change.count ?? pool.count,
    state: "RUNNING",
  };
  return { task: { ...task, status: "SUCCEEDED", modifiedAt: now, result: done }, pool: done };
}
