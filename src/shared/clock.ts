// Time comes from here so that rotation, destruction and rate windows are tested without sleeping.
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
