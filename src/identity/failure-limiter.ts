import { countedInMemory } from "../ratelimit/failure-counts.js";
import type { FailureCounts } from "../ratelimit/failure-counts.js";
import type { RateLimiterAbstract } from "rate-limiter-flexible";

const BLOCK_SECONDS = 60;

// The seconds a block has left, from the store's time to its end: at most the block's length, since the memory
// store computes that time from the wall clock (a step back of an hour told "try again in 3660 s" for a block that
// ended within the minute; library-windows.ts).
const secondsLeft = (msBeforeNext: number): number => Math.min(BLOCK_SECONDS, Math.max(1, Math.ceil(msBeforeNext / 1000)));

// Counts failed authentications per key (a source address, a client id) and blocks a key that failed too often
// in a minute, for a minute. rate-limiter-flexible does the counting, where `counts` says: in this process's memory,
// or in Redis with the request rate limits, so that servers sharing one store count together.
export class FailureLimiter {
  private readonly limiter: RateLimiterAbstract;

  // onBlocked is called once per block: for the failure that crossed the limit (on a shared store, on the one server
  // that counted it), not for the failures refused while the block lasts, with the seconds it lasts.
  constructor(
    private readonly failuresPerMinute: number,
    name: string,
    private readonly onBlocked: (key: string, seconds: number) => void = () => {},
    counts: FailureCounts = countedInMemory,
  ) {
    this.limiter = counts(name, { points: failuresPerMinute, duration: 60, blockDuration: BLOCK_SECONDS });
  }

  // Seconds the key stays blocked, or 0. Asked of the store, so that a block another server made counts here too.
  async blockedFor(key: string): Promise<number> {
    const counted = await this.limiter.get(key);
    if (counted === null || counted.consumedPoints <= this.failuresPerMinute) return 0;
    return secondsLeft(counted.msBeforeNext);
  }

  // Counts one failure; returns the seconds the key is now blocked for, or 0.
  async fail(key: string): Promise<number> {
    try {
      await this.limiter.consume(key);
      return 0;
    } catch (rejection) {
      const { consumedPoints, msBeforeNext } = rejection as { consumedPoints?: number; msBeforeNext?: number };
      if (typeof msBeforeNext !== "number" || typeof consumedPoints !== "number") throw rejection;
      const seconds = secondsLeft(msBeforeNext);
      if (consumedPoints === this.failuresPerMinute + 1) this.onBlocked(key, seconds);
      return seconds;
    }
  }
}
