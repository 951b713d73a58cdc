import { describe, expect, it } from "vitest";
import { PeriodicRun } from "../../src/shared/periodic-run.js";

describe("PeriodicRun", () => {
  it("joins a run asked for while one is going instead of starting a second", async () => {
    let runs = 0;
    let release = (): void => {};
    const periodic = new PeriodicRun(60_000, async () => {
      runs++;
      await new Promise<void>((resolve) => (release = resolve));
    });
    const first = periodic.runOnce();
    const second = periodic.runOnce();
    expect(second).toBe(first);
    release();
    await first;
    expect(runs).toBe(1);
    // Once it is over, the next request is a new run.
    const third = periodic.runOnce();
    release();
    await third;
    expect(runs).toBe(2);
  });

  it("runs every interval until stopped, and stop waits for the run in progress", async () => {
    let runs = 0;
    let finished = 0;
    const periodic = new PeriodicRun(5, async () => {
      runs++;
      await new Promise((resolve) => setTimeout(resolve, 20));
      finished++;
    });
    periodic.start();
    while (runs < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    await periodic.stop();
    expect(finished).toBe(runs);
    const after = runs;
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(runs).toBe(after);
  });
});
