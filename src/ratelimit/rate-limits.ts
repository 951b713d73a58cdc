// What the rate limits are (CONTRACT section 6): per credential, counted by the HTTP method of the RPC's
// google.api.http rule (GET; POST with PATCH, DELETE and PUT counted as POST), per minute and per day at once.

export type RateClass = "GET" | "POST";

export interface ClassLimits {
  perMinute: number;
  perDay: number;
}

export type RateLimits = Record<RateClass, ClassLimits>;

export const MINUTE_MS = 60_000;
export const DAY_MS = 24 * 3_600_000;

// The class of an RPC by the HTTP method of its REST mapping: reads are GET (HEAD with them), every other verb is
// counted with POST, as the platform's document does not give PATCH and DELETE limits of their own.
export function rateClassOf(httpMethod: string): RateClass {
  return httpMethod === "GET" || httpMethod === "HEAD" ? "GET" : "POST";
}

// One window of one class as a caller sees it: in X-RateLimit-* headers and, when refused, in the error.
export interface WindowState {
  window: "minute" | "day";
  limit: number;
  remaining: number;
  // Milliseconds until the window starts afresh.
  resetMs: number;
}

// What a limiter says about one call: refused (by the window that ran out) or allowed, with the window to show
// the caller (the refusing one, else the one with fewer calls left).
export interface Decision {
  allowed: boolean;
  shown: WindowState;
}

// Counts a call against both windows of its class for one credential. `null`: the store could not be asked
// (Redis unreachable); the stage then fails open or closed as configured.
export interface RateLimiter {
  take(rateClass: RateClass, key: string): Promise<Decision | null>;
  // Resolves once the store can be asked (at once for memory), or once waiting longer is pointless.
  ready(): Promise<void>;
  close(): Promise<void>;
}

// The decision from both windows, of either store (library-windows.ts): a call the minute refuses is not counted
// against the day (`day` is then null), so that a burst refused by the minute does not eat the day's budget.
export function decide(minute: WindowState, day: WindowState | null): Decision {
  if (minute.remaining < 0) return { allowed: false, shown: { ...minute, remaining: 0 } };
  if (day === null) return { allowed: true, shown: minute };
  if (day.remaining < 0) return { allowed: false, shown: { ...day, remaining: 0 } };
  return { allowed: true, shown: day.remaining < minute.remaining ? day : minute };
}
