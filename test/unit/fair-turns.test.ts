import { describe, expect, it } from "vitest";
import { FairTurns } from "../../src/transport/fair-turns.js";

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("work spread over the turns of the event loop", () => {
  it("runs a lone task at once", () => {
    const turns = new FairTurns(4, (err) => {
      throw err;
    });
    let ran = false;
    turns.run(() => (ran = true));
    expect(ran).toBe(true);
  });

  it("runs a burst a few tasks a turn, in order, so that the loop polls sockets in between", async () => {
    const turns = new FairTurns(4, (err) => {
      throw err;
    });
    const ran: number[] = [];
    for (let i = 0; i < 10; i++) turns.run(() => ran.push(i));
    expect(ran).toEqual([0, 1, 2, 3]);
    expect(turns.waiting).toBe(6);
    // Each later turn runs the next four.
    await nextTurn();
    expect(ran).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    await nextTurn();
    expect(ran).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(turns.waiting).toBe(0);
    // The budget is back: a lone task runs at once again.
    await nextTurn();
    turns.run(() => ran.push(10));
    expect(ran).toHaveLength(11);
  });

  it("reports a task that throws and goes on with the others; slot() waits for room", async () => {
    const errors: unknown[] = [];
    const turns = new FairTurns(1, (err) => errors.push(err));
    const ran: string[] = [];
    turns.run(() => ran.push("first"));
    turns.run(() => {
      throw new Error("boom");
    });
    turns.run(() => ran.push("third"));
    const slot = turns.slot().then(() => ran.push("slot"));
    await nextTurn();
    expect(errors).toHaveLength(1);
    await nextTurn();
    await slot;
    expect(ran).toEqual(["first", "third", "slot"]);
  });
});
