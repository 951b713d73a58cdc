import { describe, expect, it } from "vitest";
import { CombinedQueue } from "../../src/compute/tasks/combined-queue.js";
import type { QueuedTask, TaskClaims } from "../../src/storage/task-queue.js";

function claims(name: string, count: number): TaskClaims<QueuedTask> & { taken: number } {
  const q = {
    taken: 0,
    async claimTask(): Promise<QueuedTask | null> {
      if (q.taken === count) return null;
      q.taken++;
      return { id: `${name}${q.taken}`, command: name, attempts: 1 };
    },
  };
  return q;
}

describe("CombinedQueue", () => {
  it("takes from each store in turn, then from whichever still has tasks, and writes liveness through one", async () => {
    const beats: string[] = [];
    const liveness = { heartbeat: async (id: string) => void beats.push(`beat ${id}`), retireWorker: async (id: string) => void beats.push(`retire ${id}`) };
    const queue = new CombinedQueue(liveness, [claims("a", 3), claims("b", 1)]);
    const taken: (string | undefined)[] = [];
    for (let i = 0; i < 5; i++) taken.push((await queue.claimTask("w", 0, 0))?.id);
    expect(taken).toEqual(["a1", "b1", "a2", "a3", undefined]);
    await queue.heartbeat("w", 1, 0);
    await queue.retireWorker("w");
    expect(beats).toEqual(["beat w", "retire w"]);
  });
});
