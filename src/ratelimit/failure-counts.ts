import { RateLimiterMemory } from "rate-limiter-flexible";
import type { RateLimiterAbstract } from "rate-limiter-flexible";

export interface FailureWindow {
  points: number;
  // Seconds: the window the points are counted in, and how long a key that went over stays blocked.
  duration: number;
  blockDuration: number;
}

// Where a failure limiter (src/identity/failure-limiter.ts) counts, by the limiter's name: in the memory of this
// process, or in the store of the request rate limits when they are shared (Redis), so that several servers count
// failed authentications together instead of each allowing its own limit.
export type FailureCounts = (name: string, window: FailureWindow) => RateLimiterAbstract;

export const countedInMemory: FailureCounts = (name, window) => new RateLimiterMemory({ keyPrefix: name, ...window });
