import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import { ChangeFeed, defaultFeedTiming } from "../../src/storage/postgres/change-feed.js";
import { logLines } from "../support/log-lines.js";
import { createDatabase, postgresAvailable } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import type { TcpProxy } from "../support/tcp-proxy.js";

// A probe of outages (2026-11-28): the connection that listens for other servers' changes went silent (a dropped
// route: no error, no end) and was kept for good; the key cache served nothing and WaitTask heard of no other
// server's task until a restart. It is now replaced once no heartbeat has come back through it for a while.
describe.runIf(await postgresAvailable())("the change feed", () => {
  let database: TestDatabase;
  let proxy: TcpProxy;

  beforeAll(async () => {
    database = await createDatabase();
    proxy = await startTcpProxy(database.url, 5432);
  });
  afterAll(async () => {
    await proxy?.close();
    await database?.drop();
  });

  it("replaces a listening connection gone silent, and is live again", async () => {
    const lives: boolean[] = [];
    const ignore = (): void => {};
    const feed = new ChangeFeed(
      proxy.url,
      { keyChanged: ignore, accessChanged: ignore, taskStored: ignore, taskFinished: ignore, namespaceChanged: ignore, feedLive: (live) => lives.push(live) },
      createLogger("silent"),
      { ...defaultFeedTiming, replaceSilentAfterMs: 1000 },
    );
    // Heartbeats went out every 200 ms whether the one before had come back or not, and those on the silent
    // connection queued up behind one another: node-postgres warns of a statement sent to a busy connection.
    const warnings: string[] = [];
    const onWarning = (warning: Error): number => warnings.push(warning.message);
    process.on("warning", onWarning);
    try {
      await feed.start();
      expect(lives).toEqual([true]);
      proxy.silence();
      await expect.poll(() => lives, { timeout: 5000 }).toEqual([true, false, true]);
      expect(warnings.filter((w) => w.includes("already executing a query"))).toEqual([]);
    } finally {
      process.off("warning", onWarning);
      await feed.stop();
    }
  });

  // The same probe: with PostgreSQL refusing connections, the feed logged its retry, with a stack, every 0.5 s.
  it("logs at most ten failed reconnections a minute while the database refuses them", async () => {
    const own = await startTcpProxy(database.url, 5432);
    const log = logLines();
    const ignore = (): void => {};
    const feed = new ChangeFeed(
      own.url,
      { keyChanged: ignore, accessChanged: ignore, taskStored: ignore, taskFinished: ignore, namespaceChanged: ignore, feedLive: ignore },
      log.logger,
      { ...defaultFeedTiming, reconnectMs: 20 },
    );
    try {
      await feed.start();
      // Its connection dropped, and every new one refused: about a hundred retries in two seconds.
      await own.close();
      await new Promise((resolve) => setTimeout(resolve, 2000));
      expect(log.lines().filter((l) => String(l.msg).startsWith("could not listen for other servers' changes")).length).toBe(10);
    } finally {
      await feed.stop();
    }
  });
});
