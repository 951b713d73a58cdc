import { DomainError } from "../../errors/domain-error.js";
import type { ErrorDomain } from "../../errors/reasons.js";

// The request bodies the server holds in memory at once, counted while they arrive, whichever connection and
// protocol brings them. Each body is bounded (4 MiB), but not how many arrive together: 128 streams of 4 MB with a bad
// token on one HTTP/2 connection, read whole before authentication could refuse them, took the server to 1.4 GB, and
// three such connections to 2.3 GB (a probe, 2026-11-28). A body that would take the total past the budget is refused
// with UNAVAILABLE (its caller may retry in a moment) and left unread; bytes are given back once the body is whole
// (its call then runs at once) or its request is gone.
export class BodyBudget {
  private held = 0;

  constructor(readonly maxBytes: number) {}

  take(bytes: number): boolean {
    if (this.held + bytes > this.maxBytes) return false;
    this.held += bytes;
    return true;
  }

  give(bytes: number): void {
    this.held -= bytes;
  }

  get heldBytes(): number {
    return this.held;
  }
}

export function serverBusy(domain: ErrorDomain, maxBytes: number): DomainError {
  return new DomainError({
    code: "unavailable",
    reason: "REQUEST_BODIES_BUSY",
    domain,
    message: `the server holds as many request bodies as it may (${maxBytes} bytes in all); retry in a moment`,
    retryAfterSeconds: 1,
  });
}
