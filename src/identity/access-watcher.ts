import type { Logger } from "pino";
import type { Clock } from "../shared/clock.js";
import type { IdentityStore } from "../storage/identity-store.js";
import type { AccessPolicy } from "./access-policy.js";
import type { Authenticator } from "./authenticator.js";

const CHECK_EVERY_MS = 1000;
const FORGET_EXPIRED_EVERY = 60;

// The server caches credentials and grants; an operator command changes them in the store from another process.
// Every second this compares the store's access generation with the one the caches were filled under and drops
// them when it moved, so that a revocation takes effect within a second. Changes made in this process clear the
// caches at once (check()). Once a minute it also forgets tokens that have expired.
export class AccessWatcher {
  private generation: number;
  private timer: NodeJS.Timeout | null = null;
  private ticks = 0;

  constructor(
    private readonly store: IdentityStore,
    private readonly authenticator: Authenticator,
    private readonly access: AccessPolicy,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {
    this.generation = store.generation();
  }

  check(): void {
    const generation = this.store.generation();
    if (generation === this.generation) return;
    this.generation = generation;
    this.authenticator.clear();
    this.access.clear();
  }

  start(): void {
    this.timer = setInterval(() => {
      try {
        this.check();
        if (++this.ticks % FORGET_EXPIRED_EVERY === 0) this.store.deleteExpiredAccessTokens(this.clock.now());
      } catch (err) {
        this.logger.error({ err }, "could not read access changes from the store");
      }
    }, CHECK_EVERY_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}
