import type { Logger } from "pino";
import { isStoreUnavailable } from "../errors/store-unavailable.js";
import type { Clock } from "../shared/clock.js";
import { LogBudget } from "../shared/log-budget.js";
import { PeriodicRun } from "../shared/periodic-run.js";
import type { IdentityStore } from "../storage/identity-store.js";
import type { AccessPolicy } from "./access-policy.js";
import type { Authenticator } from "./authenticator.js";

const CHECK_EVERY_MS = 1000;
const FORGET_EXPIRED_EVERY = 60;

// The server caches credentials and grants; an operator command or another server changes them in the store. Every
// second this compares the store's access generation with the one the caches were filled under and drops them when
// it moved, so that a revocation takes effect within a second (and at once where the store announces its changes:
// PostgreSQL's notifications call dropCaches()). Changes made in this process drop the caches at once too. Once a
// minute it also forgets tokens that have expired.
export class AccessWatcher {
  private generation: number | null = null;
  private ticks = 0;
  // Runs never overlap: with the store silent, a read waits for its timeout (DATABASE_QUERY_TIMEOUT_SECONDS), and one
  // a second piled up until they held every connection of the pool (a probe of outages, 2026-11-28).
  private readonly periodic = new PeriodicRun(CHECK_EVERY_MS, () => this.tick());
  // A store that is down fails every check: one line a minute says so, where there was one a second.
  private readonly storeNotices = new LogBudget(1);

  constructor(
    private readonly store: IdentityStore,
    private readonly authenticator: Authenticator,
    private readonly access: AccessPolicy,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  // Drops every cached credential and grant: access changed.
  dropCaches(): void {
    this.authenticator.clear();
    this.access.clear();
  }

  async check(): Promise<void> {
    const generation = await this.store.generation();
    if (generation === this.generation) return;
    this.generation = generation;
    this.dropCaches();
  }

  start(): void {
    this.periodic.start();
  }

  private async tick(): Promise<void> {
    try {
      await this.check();
      if (++this.ticks % FORGET_EXPIRED_EVERY === 0) await this.store.deleteExpiredAccessTokens(this.clock.now());
    } catch (err) {
      if (!isStoreUnavailable(err)) this.logger.error({ err }, "could not read access changes from the store");
      else if (this.storeNotices.take()) this.logger.warn({ err }, "could not read access changes from the store (at most one such line a minute)");
    }
  }

  // Stops the checks, and waits for one in progress.
  stop(): Promise<void> {
    return this.periodic.stop();
  }
}
