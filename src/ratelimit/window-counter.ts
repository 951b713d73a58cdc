// A fixed window per key, opened by the key's first call and lasting `windowMs`, as rate-limiter-flexible's
// stores count (so that memory and Redis behave alike). Synchronous: with the memory store a cache-hit Encrypt stays
// a synchronous call (docs/rate-limits.md says why that matters and what it costs).

interface Entry {
  count: number;
  resetAt: number;
}

// Entries of closed windows are dropped when the map has grown to twice its size after the last sweep, so memory
// follows the number of callers active within one window, at an amortized constant cost per call.
const FIRST_SWEEP = 1024;
// A bound on the keys one window holds: calls without credentials are counted by source address, and a flood from
// many addresses (IPv6 has plenty) must not grow the day's map for 24 hours. Beyond it the oldest key is dropped,
// which gives that key a fresh budget: the limits stay exact for the most recent million callers.
const MAX_KEYS = 1_000_000;

export class WindowCounter {
  private readonly entries = new Map<string, Entry>();
  private sweepAt = FIRST_SWEEP;

  constructor(
    readonly limit: number,
    readonly windowMs: number,
    private readonly maxKeys = MAX_KEYS,
  ) {}

  // Milliseconds until the window of the last hit() ends: a field rather than a returned object, so that a hit
  // allocates nothing once its key is known.
  lastResetMs = 0;

  // Counts one call of `key` at `now`; returns how many calls are left in its window (negative: over the limit).
  hit(key: string, now: number): number {
    let entry = this.entries.get(key);
    if (entry === undefined) {
      if (this.entries.size >= this.sweepAt) this.sweep(now);
      if (this.entries.size >= this.maxKeys) this.entries.delete(this.entries.keys().next().value!);
      entry = { count: 0, resetAt: now + this.windowMs };
      this.entries.set(key, entry);
    } else if (now >= entry.resetAt) {
      entry.count = 0;
      entry.resetAt = now + this.windowMs;
    }
    entry.count++;
    this.lastResetMs = entry.resetAt - now;
    return this.limit - entry.count;
  }

  get size(): number {
    return this.entries.size;
  }

  private sweep(now: number): void {
    for (const [key, entry] of this.entries) if (now >= entry.resetAt) this.entries.delete(key);
    this.sweepAt = Math.max(FIRST_SWEEP, this.entries.size * 2);
  }
}
