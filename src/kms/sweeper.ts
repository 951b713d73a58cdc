import type { Logger } from "pino";
import type { KeyManager } from "./key-manager.js";

// Carries out due destructions and rotations in the background. Runs never overlap: a slow run delays the
// next one instead of racing it.
export class Sweeper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly manager: KeyManager,
    private readonly intervalMs: number,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.runOnce(), this.intervalMs);
    this.timer.unref();
  }

  runOnce(): Promise<void> {
    this.running ??= this.run().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async run(): Promise<void> {
    try {
      // Batches of 100 until nothing is due, so a backlog clears in one run without one huge transaction.
      while ((await this.manager.sweepDestroyed()) === 100);
      while ((await this.manager.rotateDue()) === 100);
    } catch (err) {
      this.logger.error({ err }, "key sweep failed; retrying at the next interval");
    }
  }

  async stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}
