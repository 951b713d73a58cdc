import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import type pg from "pg";
import type { Logger } from "pino";
import type { ChangeListener } from "../storage.js";
import { LogBudget } from "../../shared/log-budget.js";
import { CHANGE_CHANNEL, createClient } from "./sql.js";

export interface FeedTiming {
  // How often this server sends itself a heartbeat through the database.
  heartbeatMs: number;
  // The feed is live while the last heartbeat that came back was sent at most this long ago.
  staleAfterMs: number;
  // How often liveness is judged: a change is acted on at most this much after it happens.
  watchdogMs: number;
  // Wait before connecting again after the listening connection was lost.
  reconnectMs: number;
  // A listening connection from which no heartbeat has come back for this long is replaced, broken or not.
  replaceSilentAfterMs: number;
}

// What the feed tells: the server's changes (ChangeListener), and those only the PostgreSQL store itself acts on.
export interface FeedListener extends ChangeListener {
  // The live keys of a namespace changed (a key created, or one's goneAt changed).
  namespaceChanged(parentId: string): void;
}

// Together these bound how stale a cached key can be (docs/storage.md): 700 + 100 ms.
export const defaultFeedTiming: FeedTiming = { heartbeatMs: 200, staleAfterMs: 700, watchdogMs: 100, reconnectMs: 500, replaceSilentAfterMs: 5000 };

const START_TIMEOUT_MS = 10_000;

export const FEED_APPLICATION_NAME = "cloudplane change feed";

// Other servers' changes, from PostgreSQL's LISTEN/NOTIFY on one connection of its own. Every store announces its
// changes in the transaction that makes them (sql.ts `announce`), and PostgreSQL delivers notifications to a
// listener in commit order. So when a heartbeat this server sent through the database at time s comes back, every
// change committed before s has been delivered and acted on. The feed is live while the last heartbeat back was
// sent within staleAfterMs; the key cache serves nothing while it is not (ChangeListener.feedLive). A listening
// connection that breaks, or a database that stops answering, thus stops the cache within staleAfterMs + watchdogMs
// rather than letting it serve material another server has disabled.
export class ChangeFeed {
  private client: pg.Client | null = null;
  // Drops the current listening connection and connects again; null while there is none.
  private drop: ((err?: Error) => void) | null = null;
  // The connection whose heartbeat has not come back yet, if any (beat).
  private beatingOn: pg.Client | null = null;
  private connectedAt = Number.NEGATIVE_INFINITY;
  private readonly heartbeatChannel = `cloudplane_heartbeat_${randomBytes(8).toString("hex")}`;
  private lastConfirmedSentAt = Number.NEGATIVE_INFINITY;
  private live = false;
  private stopped = false;
  private timers: NodeJS.Timeout[] = [];
  private reconnecting: NodeJS.Timeout | null = null;
  private firstHeartbeat: (() => void) | null = null;
  // A retry every reconnectMs logged a line with its stack each time while PostgreSQL refused: about 10 MB of log an
  // hour (a probe of outages, 2026-11-28).
  private readonly retryNotices = new LogBudget(10);

  constructor(
    private readonly url: string,
    private readonly listener: FeedListener,
    private readonly logger: Logger,
    private readonly timing: FeedTiming = defaultFeedTiming,
  ) {}

  // Resolves once the feed is live (a first heartbeat came back); rejects when the database cannot be reached or
  // delivers no notification within START_TIMEOUT_MS (a connection pooler in transaction mode drops LISTEN).
  async start(): Promise<void> {
    let timeout: NodeJS.Timeout | undefined;
    const live = new Promise<void>((resolve, reject) => {
      this.firstHeartbeat = resolve;
      timeout = setTimeout(
        () => reject(new Error(`no notification came back from PostgreSQL within ${START_TIMEOUT_MS} ms: LISTEN/NOTIFY must reach the server directly`)),
        START_TIMEOUT_MS,
      );
    });
    try {
      await this.connect();
      this.timers.push(setInterval(() => this.beat(), this.timing.heartbeatMs));
      this.timers.push(setInterval(() => this.judge(), this.timing.watchdogMs));
      for (const t of this.timers) t.unref();
      this.beat();
      await live;
    } catch (err) {
      await this.stop();
      throw err;
    } finally {
      clearTimeout(timeout);
    }
  }

  private async connect(): Promise<void> {
    // Named, so that an operator (and a test) can tell it from the pool's connections in pg_stat_activity.
    const client = createClient(this.url, { applicationName: FEED_APPLICATION_NAME });
    client.on("notification", (msg) => this.receive(msg.channel, msg.payload ?? ""));
    const lost = (err?: Error): void => {
      if (this.client !== client) return;
      this.client = null;
      this.drop = null;
      client.removeAllListeners("notification");
      void client.end().catch(() => {});
      this.judge();
      if (this.stopped) return;
      this.logger.warn({ err }, "lost the connection that receives other servers' changes: the key cache serves nothing until it is back");
      this.scheduleReconnect();
    };
    client.on("error", lost);
    client.on("end", () => lost());
    await client.connect();
    await client.query(`LISTEN ${CHANGE_CHANNEL}`);
    await client.query(`LISTEN ${this.heartbeatChannel}`);
    this.client = client;
    this.drop = lost;
    this.connectedAt = performance.now();
    // Changes may have gone unannounced while there was no listener: access caches are read again. The key cache is
    // dropped when the feed turns live again (feedLive).
    this.listener.accessChanged();
  }

  private scheduleReconnect(): void {
    if (this.reconnecting !== null || this.stopped) return;
    this.reconnecting = setTimeout(() => {
      this.reconnecting = null;
      this.connect().catch((err: unknown) => {
        if (this.retryNotices.take()) this.logger.warn({ err }, "could not listen for other servers' changes; retrying (at most 10 such lines a minute)");
        this.scheduleReconnect();
      });
    }, this.timing.reconnectMs);
    this.reconnecting.unref();
  }

  // Sent on the listening connection itself: PostgreSQL delivers a session's own notifications too, in commit order
  // with everyone else's. Sent through the pool, a heartbeat waited behind the calls when they held every connection
  // (statements waiting for a lock): the feed judged a healthy database unheard, replaced its connection, dropped the
  // key cache and page positions, and /readyz said "store unreachable" while the database answered (a probe,
  // 2026-11-28).
  //
  // One at a time: a heartbeat sent while the one before has not come back waits behind it on the connection, and
  // those queued on a slow or silent connection piled up, five a second, each a statement node-postgres warns of
  // (queueing on a busy client is deprecated, and goes in pg 9). Skipping a beat delays no confirmation: the
  // connection runs one statement at a time either way.
  private beat(): void {
    const client = this.client;
    if (client === null || this.beatingOn === client) return;
    this.beatingOn = client;
    const sentAt = performance.now();
    client
      .query("SELECT pg_notify($1, $2)", [this.heartbeatChannel, String(sentAt)])
      .catch((err: unknown) => {
        this.logger.debug({ err }, "could not send a heartbeat through the database");
      })
      .finally(() => {
        if (this.beatingOn === client) this.beatingOn = null;
      });
  }

  private receive(channel: string, payload: string): void {
    if (channel === this.heartbeatChannel) {
      this.lastConfirmedSentAt = Math.max(this.lastConfirmedSentAt, Number(payload));
      this.judge();
      this.firstHeartbeat?.();
      this.firstHeartbeat = null;
      return;
    }
    const kind = payload[0];
    const id = payload.slice(2);
    if (kind === "k") this.listener.keyChanged(id);
    else if (kind === "a") this.listener.accessChanged();
    else if (kind === "t") this.listener.taskStored();
    else if (kind === "f") this.listener.taskFinished(id);
    else if (kind === "n") this.listener.namespaceChanged(id);
  }

  private judge(): void {
    const now = performance.now();
    // A connection gone silent (a dropped route: no error, no end) told nothing for good: the cache served nothing
    // and WaitTask heard of no other server's task until a restart (a probe of outages, 2026-11-28).
    if (this.drop !== null && !this.stopped && now - Math.max(this.lastConfirmedSentAt, this.connectedAt) > this.timing.replaceSilentAfterMs) {
      this.drop(new Error(`no heartbeat came back through it for ${this.timing.replaceSilentAfterMs} ms`));
    }
    const live = this.client !== null && !this.stopped && now - this.lastConfirmedSentAt <= this.timing.staleAfterMs;
    if (live === this.live) return;
    this.live = live;
    this.listener.feedLive(live);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    if (this.reconnecting !== null) clearTimeout(this.reconnecting);
    const client = this.client;
    this.client = null;
    this.judge();
    await client?.end().catch(() => {});
  }
}
