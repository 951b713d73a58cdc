// Runs a piece of background work every interval. Runs never overlap: a slow run delays the next one instead of
// racing it, and a run asked for while one is going joins it. The timer does not keep the process alive.
export class PeriodicRun {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly intervalMs: number,
    // Must not throw: it logs its own failures, and the next interval tries again.
    private readonly work: () => Promise<void>,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.runOnce(), this.intervalMs);
    this.timer.unref();
  }

  runOnce(): Promise<void> {
    this.running ??= this.work().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  // Stops the timer and waits for a run in progress.
  async stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}
