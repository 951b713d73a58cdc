// What the rate limits are (CONTRACT section 6): per credential, counted by the HTTP method of the RPC's
// google.api.http rule (GET; POST with PATCH, DELETE and PUT counted as POST), per minute and per day at once.

import type { FailureCounts } from "./failure-counts.js";

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

// What a limiter says about one call: refused or allowed, with the window to show the caller (decide).
export interface Decision {
  allowed: boolean;
  shown: WindowState;
}

// Counts a call against both windows of its class for one credential. `null`: the store could not be asked
// (Redis unreachable); the stage then fails open or closed as configured.
export interface RateLimiter {
  take(rateClass: RateClass, key: string): Promise<Decision | null>;
  // Where failed authentications are counted: the same store, shared by the servers as far as it is.
  readonly failureCounts: FailureCounts;
  // Resolves once the store can be asked (at once for memory), or once waiting longer is pointless.
  ready(): Promise<void>;
  close(): Promise<void>;
}

// The decision from both windows as this call left them, of either store (library-windows.ts). `remaining` is what
// each window has left after the call, negative in a window that refused it; a call the minute refuses is not charged
// to the day (its count comes without the call), so that a burst refused by the minute does not eat the day's budget.
//
// Refused: the window shown (in the message, QuotaFailure, RetryInfo, Retry-After and X-RateLimit-*) is the one that
// holds the caller back longest, i.e. of the windows with nothing left, the one that starts afresh last. Once the
// day is spent that is the day, also when the minute refused this call: a caller told to come back in a minute would
// be refused again then, for the rest of the day. Allowed: the window with fewer calls left, and of two with as many,
// the one that starts afresh later (its numbers hold for longer).
export function decide(minute: WindowState, day: WindowState): Decision {
  if (minute.remaining < 0 || day.remaining < 0) {
    const blocking = minute.remaining > 0 ? day : day.remaining > 0 ? minute : later(minute, day);
    return { allowed: false, shown: { ...blocking, remaining: 0 } };
  }
  const shown = day.remaining < minute.remaining || (day.remaining === minute.remaining && day.resetMs >= minute.resetMs) ? day : minute;
  return { allowed: true, shown };
}

function later(a: WindowState, b: WindowState): WindowState {
  return b.resetMs >= a.resetMs ? b : a;
}
