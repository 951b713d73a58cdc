import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { NodePool_State, NodePoolSchema } from "../../gen/compute/cluster/v1/node_pool_pb.js";
import { Task_Status } from "../../gen/compute/cluster/v1/task_pb.js";
import type { Task } from "../../gen/compute/cluster/v1/task_pb.js";
import type { Api } from "./api.js";
import { byId, fill, input, onSubmit, row } from "./dom.js";

// What a finished task left: the pool of its response, or its error.
function result(task: Task): string {
  if (task.error !== undefined) return `${task.error.message}`;
  const pool = task.response === undefined ? undefined : anyUnpack(task.response, NodePoolSchema);
  return pool === undefined ? "" : `pool ${pool.name}: ${NodePool_State[pool.state]}`;
}

// The node pools of a cluster and the tasks of its service instance; creating a pool, whose task is watched
// (WaitTask, a few seconds at a time) until it is done.
export function poolsView(api: Api): void {
  async function load(): Promise<void> {
    const serviceInstanceId = input("service-instance");
    const [{ nodePools }, { tasks }] = await Promise.all([
      api.pools.listNodePools({ serviceInstanceId, clusterId: input("cluster") }),
      api.tasks.listTasks({ serviceInstanceId }),
    ]);
    fill(
      "pools",
      nodePools.map((p) => {
        const state = NodePool_State[p.state];
        return row([p.name, p.nodePoolId, p.nodeConfig?.computeFlavor ?? "", String(p.scalePolicy?.fixedScale?.count ?? 0), [state, `state-${state}`]]);
      }),
    );
    fill(
      "tasks",
      tasks.map((t) => {
        const status = Task_Status[t.status];
        const tr = row([t.id, t.command, [status, `status-${status}`], t.createdBy, result(t)]);
        tr.dataset["task"] = t.id;
        return tr;
      }),
    );
  }

  onSubmit("pools-load", load);
  onSubmit("pool-create", async () => {
    const serviceInstanceId = input("service-instance");
    const { task } = await api.pools.createNodePool({
      serviceInstanceId,
      clusterId: input("cluster"),
      nodePoolName: input("pool-name"),
      nodeConfig: { computeFlavor: input("flavor") },
      scalePolicy: { fixedScale: { count: Number(input("count")) } },
    });
    if (task === undefined) throw new Error("the server answered without a task");
    let current: Task = task;
    const watch = byId("watch");
    await load();
    while (!current.done) {
      watch.textContent = `task ${current.id} ${current.command}: ${Task_Status[current.status]} ...`;
      current = (await api.tasks.waitTask({ serviceInstanceId, taskId: current.id, timeout: durationFromMs(5000) })).task ?? current;
    }
    watch.textContent = `task ${current.id} ${current.command}: ${Task_Status[current.status]}`;
    await load();
  });
}
