// At most `perMinute` log lines of one kind a minute: a failing disk or database fails every call, and a line each
// wrote megabytes a minute (a probe on a full disk, 2026-11-28). `take()` says whether this one may be logged.
export class LogBudget {
  private windowStart = Number.NEGATIVE_INFINITY;
  private count = 0;

  constructor(private readonly perMinute: number) {}

  take(): boolean {
    const now = performance.now();
    if (now - this.windowStart >= 60_000) {
      this.windowStart = now;
      this.count = 0;
    }
    return this.count++ < this.perMinute;
  }
}
