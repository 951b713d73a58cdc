import { afterAll, afterEach, describe, expect, it } from "vitest";
import { AuditRetention, PRUNE_PIECE, pruneAuditTrail } from "../../src/identity/audit-retention.js";
import type { AuditRecord } from "../../src/identity/identity-model.js";
import { createLogger } from "../../src/logger.js";
import { openSqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import type { Storage } from "../../src/storage/storage.js";
import type { AuditStore } from "../../src/storage/identity-store.js";
import { FakeClock } from "../support/fake-clock.js";
import { logLines } from "../support/log-lines.js";
import { tempDir } from "../support/temp-dir.js";

const DAY = 24 * 3600 * 1000;

function record(at: number): AuditRecord {
  return { at, principal: "principal-a", method: "kms.v1.KeyManagerService/Encrypt", protocol: "grpc", scope: "kms-namespace:ns", resource: "/v1/keys/k1", code: 0, requestId: `r${at}` };
}

// The real embedded store, with its prune calls counted.
function countingStore(store: AuditStore): AuditStore & { prunes: number } {
  const counted = {
    prunes: 0,
    append: (records: readonly AuditRecord[]) => store.append(records),
    query: store.query.bind(store),
    prune(before: number, limit: number) {
      counted.prunes++;
      return store.prune(before, limit);
    },
  };
  return counted;
}

describe("audit retention", () => {
  const dir = tempDir();
  let storage: Storage | null = null;
  let retention: AuditRetention | null = null;

  afterEach(async () => {
    await retention?.stop();
    retention = null;
    await storage?.close();
    storage = null;
  });
  afterAll(() => dir.remove());

  async function trailOfDays(clock: FakeClock, days: number[]): Promise<AuditStore & { prunes: number }> {
    const path = `${dir.path}/${Math.random().toString(36).slice(2)}`;
    storage = await openSqliteStorage(path, createLogger("silent"));
    for (const d of days) await storage.audit.append([record(clock.now() - d * DAY), record(clock.now() - d * DAY + 1)]);
    return countingStore(storage.audit);
  }

  it("deletes the batches older than the retention period, keeps the rest, and says so in the log", async () => {
    const clock = new FakeClock();
    const store = await trailOfDays(clock, [100, 91, 89, 1]);
    const { logger, lines } = logLines();
    retention = new AuditRetention(store, clock, 90 * DAY, 60_000, logger);
    await retention.runOnce();
    expect((await store.query({ limit: 100 })).map((r) => r.at)).toEqual(
      [89, 1].flatMap((d) => [clock.now() - d * DAY, clock.now() - d * DAY + 1]),
    );
    const line = lines().find((l) => l.msg === "deleted audit records older than the retention period");
    expect(line).toMatchObject({ batches: 2, before: new Date(clock.now() - 90 * DAY).toISOString() });
    // Time passes: the next run deletes what has grown old since.
    clock.advance(2 * DAY);
    await retention.runOnce();
    expect((await store.query({ limit: 100 })).map((r) => r.at)).toEqual([clock.now() - 3 * DAY, clock.now() - 3 * DAY + 1]);
  });

  it("deletes a backlog larger than one piece in pieces, to the last batch", async () => {
    const clock = new FakeClock();
    const store = await trailOfDays(clock, []);
    const batches = PRUNE_PIECE * 2 + 17;
    for (let i = 0; i < batches; i++) await store.append([record(clock.now() - 10 * DAY + i)]);
    await store.append([record(clock.now())]);
    expect(await pruneAuditTrail(store, clock.now() - DAY)).toBe(batches);
    expect(store.prunes).toBe(3);
    expect(await store.query({ limit: 10 })).toEqual([record(clock.now())]);
  });

  it("stops between pieces once asked to", async () => {
    const clock = new FakeClock();
    const store = await trailOfDays(clock, []);
    for (let i = 0; i < PRUNE_PIECE * 3; i++) await store.append([record(clock.now() - 10 * DAY + i)]);
    expect(await pruneAuditTrail(store, clock.now(), () => true)).toBe(PRUNE_PIECE);
    expect((await store.query({ limit: PRUNE_PIECE * 3 })).length).toBe(PRUNE_PIECE * 2);
  });

  it("keeps everything with a retention of 0", async () => {
    const clock = new FakeClock();
    const store = await trailOfDays(clock, [3650, 1]);
    retention = new AuditRetention(store, clock, 0, 1, createLogger("silent"));
    retention.start();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await retention.runOnce();
    expect(store.prunes).toBe(0);
    expect((await store.query({ limit: 10 })).length).toBe(4);
  });

  it("runs at start, and logs a store that fails instead of throwing, then runs again at the next interval", async () => {
    const clock = new FakeClock();
    const store = await trailOfDays(clock, [100]);
    let failures = 1;
    const flaky: AuditStore = {
      append: (records) => store.append(records),
      query: (filter) => store.query(filter),
      prune: (before, limit) => (failures-- > 0 ? Promise.reject(new Error("database is locked")) : store.prune(before, limit)),
    };
    const { logger, lines } = logLines();
    retention = new AuditRetention(flaky, clock, 90 * DAY, 10, logger);
    retention.start();
    for (let i = 0; i < 100 && (await store.query({ limit: 10 })).length > 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await store.query({ limit: 10 })).toEqual([]);
    expect(lines().find((l) => l.msg === "deleting old audit records failed; retrying at the next interval")).toMatchObject({ err: { message: "database is locked" } });
  });
});
