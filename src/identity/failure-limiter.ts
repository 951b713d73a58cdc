import { RateLimiterMemory } from "rate-limiter-flexible";

// Counts failed authentications per key (a source address, a client id) and blocks a key that failed too often
// in a minute, for a minute. A blocked key is refused before its credentials are looked at, so that guessing
// stops being worth anything; other callers are not slowed, since a refusal costs a map lookup.
//
// rate-limiter-flexible does the counting (its in-memory store now; the same limiter has Redis and PostgreSQL
// stores for several servers). Its API is asynchronous, which suits failures; the block is mirrored in a map so
// that the check every call makes stays synchronous.
// Each entry took a minute's worth of failures to earn, so the map stays small; expired ones are dropped when it
// grows.
const MAX_BLOCKED = 10_000;

export class FailureLimiter {
  private readonly limiter: RateLimiterMemory;
  private readonly blockedUntil = new Map<string, number>();

  // onBlocked is called once per block: when a key that was not blocked becomes so (not for the failures that are
  // refused while it is), with the seconds it stays blocked.
  constructor(
    failuresPerMinute: number,
    private readonly onBlocked: (key: string, seconds: number) => void = () => {},
  ) {
    this.limiter = new RateLimiterMemory({ points: failuresPerMinute, duration: 60, blockDuration: 60 });
  }

  // Seconds the key stays blocked, or 0.
  blockedFor(key: string): number {
    const until = this.blockedUntil.get(key);
    if (until === undefined) return 0;
    const left = until - Date.now();
    if (left <= 0) {
      this.blockedUntil.delete(key);
      return 0;
    }
    return Math.ceil(left / 1000);
  }

  private forgetExpired(): void {
    const now = Date.now();
    for (const [key, until] of this.blockedUntil) if (until <= now) this.blockedUntil.delete(key);
  }

  // Counts one failure; returns the seconds the key is now blocked for, or 0.
  async fail(key: string): Promise<number> {
    try {
      await this.limiter.consume(key);
      return 0;
    } catch (rejection) {
      const ms = (rejection as { msBeforeNext?: number }).msBeforeNext;
      if (typeof ms !== "number") throw rejection;
      const already = this.blockedFor(key) > 0;
      if (this.blockedUntil.size >= MAX_BLOCKED) this.forgetExpired();
      this.blockedUntil.set(key, Date.now() + ms);
      const seconds = Math.max(1, Math.ceil(ms / 1000));
      if (!already) this.onBlocked(key, seconds);
      return seconds;
    }
  }
}
