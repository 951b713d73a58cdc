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

  // Rotations first, and the destructions' failure apart from them: a destruction backlog being swept delayed every
  // due rotation until it was cleared (half an hour for 4M versions), and destructions that failed at every interval
  // (a scan cancelled by the statement timeout, a VACUUM behind another's lock) left rotations undone for as long as
  // that lasted (a probe, 2026-11-28). When the rotations meet the store's outage the run ends there, one failed
  // statement a run as before: going on to the destructions kept a server's pool busier while its connections were
  // silent, and it served again seconds later in the test of that outage.
  private async run(): Promise<void> {
    const rotated = await this.part("rotations", async () => {
      while ((await this.manager.rotateDue()) === 100);
    });
    if (!rotated) return;
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

  // Whether the run goes on: not after the store's outage.
  private async part(part: string, steps: () => Promise<void>): Promise<boolean> {
    try {
      await steps();
      return true;
    } catch (err) {
      const level = failureLevel(err);
      this.logger[level]({ err, part }, `key sweep failed (its ${part}); retrying at the next interval`);
      return level !== "warn";
    }
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }
}
