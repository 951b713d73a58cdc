import type { Call } from "./call.js";

// What a call yields: the response message (or, for Connect's streaming calls, what Connect's handler returned),
// synchronously when it is at hand. A cache-hit Encrypt never becomes a promise, which is worth a tenth of its
// cost.
export type Outcome = unknown;

export type Next = (call: Call) => Outcome;

// One concern of every call (the request id, the deadline, credentials, errors and the log line ...). A stage
// passes the call on by calling `next` and returning what it returns, or answers it without calling `next` by
// throwing a refusal (a DomainError or CallError: unauthenticated, rate limited ...); either way it may add
// response headers to the call. A stage does not make up a response message: the handler is the only source of
// those. A stage must not turn a synchronous outcome into a promise.
export type Stage = (call: Call, next: Next) => Outcome;

// The stages around a method's final step, composed once at start-up: a call runs through plain function
// calls, with nothing allocated per call for the composition.
export function compose(stages: readonly Stage[], last: Next): Next {
  let next = last;
  for (let i = stages.length - 1; i >= 0; i--) {
    const stage = stages[i]!;
    const after = next;
    next = (call) => stage(call, after);
  }
  return next;
}
