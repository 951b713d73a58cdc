import type { Clock } from "../../src/shared/clock.js";

// A clock the test moves by hand, so destruction and rotation happen without sleeping.
export class FakeClock implements Clock {
  constructor(private ms = Date.parse("2026-01-01T00:00:00Z")) {}

  now(): number {
    return this.ms;
  }

  advance(ms: number): void {
    this.ms += ms;
  }
}
