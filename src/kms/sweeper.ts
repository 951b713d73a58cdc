import type { Logger } from "pino";
import { failureLevel } from "../errors/store-unavailable.js";
import { PeriodicRun } from "../shared/periodic-run.js";
import type { KeyManager } from "./key-manager.js";

// Carries out due destructions and rotations in the background, every interval.
export class Sweeper {
  private readonly periodic: PeriodicRun;
  // Material was erased and the store still keeps copies beside its rows (KmsStore.scrubErased).
  private scrubPending = false;

  constructor(
    private readonly manager: KeyManager,
    intervalMs: number,
    private readonly logger: Logger,
  ) {
    this.periodic = new PeriodicRun(intervalMs, () => this.run());
  }

  start(): void {
    this.periodic.start();
  }

  runOnce(): Promise<void> {
    return this.periodic.runOnce();
  }

  private async run(): Promise<void> {
    try {
      // Batches of 100 until nothing is due, so a backlog clears in one run without one huge transaction.
      let swept: number;
      do {
        swept = await this.manager.sweepDestroyed();
        if (swept > 0) this.scrubPending = true;
      } while (swept === 100);
      if (this.scrubPending) this.scrubPending = !(await this.manager.scrubErased());
      while ((await this.manager.rotateDue()) === 100);
    } catch (err) {
      this.logger[failureLevel(err)]({ err }, "key sweep failed; retrying at the next interval");
    }
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }
}
