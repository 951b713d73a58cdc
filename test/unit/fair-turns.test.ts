import { describe, expect, it } from "vitest";
import { FairTurns } from "../../src/transport/fair-turns.js";

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

// A task that keeps the event loop busy for `ms`, as a call's start or end in connect-node does.
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

const rethrow = (err: unknown) => {
  throw err;
};

describe("work spread over the turns of the event loop", () => {
  it("runs a lone task at once, and cheap tasks at once however many", () => {
    // A budget far above what 1,000 increments take, so that the scheduler taking the CPU away from this process
    // for a few ms on a busy machine cannot end the turn early (it did with 8 ms under CI load).
    const turns = new FairTurns(200, rethrow);
    let ran = 0;
    for (let i = 0; i < 1000; i++) turns.run(() => ran++);
    expect(ran).toBe(1000);
    expect(turns.waiting).toBe(0);
  });

  it("runs a burst of costly tasks for about the budget a turn, in order, so that the loop polls sockets in between", async () => {
    const turns = new FairTurns(5, rethrow);
    const ran: number[] = [];
    for (let i = 0; i < 10; i++) {
      turns.run(() => {
        busy(2);
        ran.push(i);
      });
    }
    // 2 ms each against 5 ms a turn: three, then the turn is over (fewer if the machine is busy).
    expect(ran.length).toBeGreaterThanOrEqual(1);
    expect(ran.length).toBeLessThanOrEqual(3);
    expect(ran).toEqual([0, 1, 2].slice(0, ran.length));
    expect(turns.waiting).toBe(10 - ran.length);
    let polled = 0;
    const poller = setInterval(() => polled++, 0);
    while (turns.waiting > 0) await nextTurn();
    await nextTurn();
    clearInterval(poller);
    expect(ran).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // Timers ran between the batches.
    expect(polled).toBeGreaterThan(0);
    // The turn is over: a lone task runs at once again.
    turns.run(() => ran.push(10));
    expect(ran).toHaveLength(11);
  });

  it("runs at least one task a turn, reports one that throws, and slot() waits for room", async () => {
    const errors: unknown[] = [];
    const turns = new FairTurns(1, (err) => errors.push(err));
    const ran: string[] = [];
    turns.run(() => {
      busy(3);
      ran.push("first");
    });
    turns.run(() => {
      busy(3);
      throw new Error("boom");
    });
    turns.run(() => ran.push("third"));
    const slot = turns.slot().then(() => ran.push("slot"));
    expect(ran).toEqual(["first"]);
    while (turns.waiting > 0) await nextTurn();
    await slot;
    expect(errors).toHaveLength(1);
    expect(ran).toEqual(["first", "third", "slot"]);
  });
});
