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

  // Rotations first, and each part on its own: a destruction backlog being swept delayed every due rotation until it
  // was cleared (half an hour for 4M versions), and a failure of the destructions (a scan cancelled by the statement
  // timeout, a VACUUM behind another's lock) left rotations undone for as long as it lasted (a probe, 2026-11-28).
  private async run(): Promise<void> {
    await this.part("rotations", async () => {
      while ((await this.manager.rotateDue()) === 100);
    });
    await this.part("destructions", async () => {
      // Batches of 100 until nothing is due, so a backlog clears in one run without one huge transaction.
      let swept: number;
      do {
        swept = await this.manager.sweepDestroyed();
        if (swept > 0) this.scrubPending = true;
      } while (swept === 100);
      if (this.scrubPending) this.scrubPending = !(await this.manager.scrubErased());
    });
  }

  private async part(part: string, steps: () => Promise<void>): Promise<void> {
    try {
      await steps();
    } catch (err) {
      this.logger[failureLevel(err)]({ err, part }, `key sweep failed (its ${part}); retrying at the next interval`);
    }
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }
}
