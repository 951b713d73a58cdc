import { describe, expect, it } from "vitest";
import { AuditTrail, MAX_BATCH } from "../../src/identity/audit-trail.js";
import type { AuditRecord } from "../../src/identity/identity-model.js";
import { createLogger } from "../../src/logger.js";
import { logLines } from "../support/log-lines.js";
import type { AuditStore } from "../../src/storage/identity-store.js";

function record(i: number): AuditRecord {
  return {
    at: 1_700_000_000_000 + i,
    principal: "svc-a",
    method: "kms.v1.KeyManagerService/Encrypt",
    protocol: "grpc",
    scope: "kms-namespace:demo",
    resource: "/v1/keys/k1",
    code: 0,
    requestId: `request-${i}`,
  };
}

// Keeps every batch it is handed, in order; fails the batches whose number is in `failing` (counting from 0).
function memoryStore(failing: readonly number[] = []): AuditStore & { batches: AuditRecord[][] } {
  const batches: AuditRecord[][] = [];
  return {
    batches,
    append(records) {
      batches.push([...records]);
      return failing.includes(batches.length - 1) ? Promise.reject(new Error("disk full")) : Promise.resolve();
    },
    query() {
      return Promise.resolve(batches.flat());
    },
    // The trail never prunes; audit-retention.test.ts tests pruning on the real stores.
    prune() {
      return Promise.resolve(0);
    },
  };
}

describe("AuditTrail", () => {
  it("stores the records of one turn of the event loop as one batch, at the end of the turn", async () => {
    const store = memoryStore();
    const trail = new AuditTrail(store, createLogger("silent"));
    const stored = [0, 1, 2, 3, 4].map((i) => trail.append(record(i)));
    expect(store.batches).toEqual([]);
    await Promise.all(stored);
    expect(store.batches).toEqual([[0, 1, 2, 3, 4].map(record)]);
  });

  it("stores a batch as soon as it holds MAX_BATCH records, and the rest of the turn in the next", async () => {
    const store = memoryStore();
    const trail = new AuditTrail(store, createLogger("silent"));
    const ids = Array.from({ length: MAX_BATCH + 3 }, (_, i) => i);
    const stored = ids.map((i) => trail.append(record(i)));
    // Handed to the store within the call that filled the batch, before the turn ends.
    expect(store.batches.map((b) => b.length)).toEqual([MAX_BATCH]);
    await Promise.all(stored);
    expect(store.batches).toEqual([ids.slice(0, MAX_BATCH).map(record), ids.slice(MAX_BATCH).map(record)]);
  });

  it("fails every call of a batch that could not be stored, and only those", async () => {
    const store = memoryStore([0]);
    const trail = new AuditTrail(store, createLogger("silent"));
    const full = Array.from({ length: MAX_BATCH }, (_, i) => trail.append(record(i)));
    const next = trail.append(record(MAX_BATCH));
    const outcomes = await Promise.allSettled([...full, next]);
    expect(outcomes.slice(0, MAX_BATCH).every((o) => o.status === "rejected")).toBe(true);
    expect(outcomes[MAX_BATCH]).toEqual({ status: "fulfilled", value: undefined });
    expect(store.batches.map((b) => b.length)).toEqual([MAX_BATCH, 1]);
  });

  // A probe on a full disk (2026-11-28): one error line with its stack per failed batch, 2.5 MB in 10 s under load.
  it("logs at most ten failed batches a minute, while every one still fails its calls", async () => {
    const store = memoryStore(Array.from({ length: 25 }, (_, i) => i));
    const log = logLines();
    const trail = new AuditTrail(store, log.logger);
    const outcomes: PromiseSettledResult<void>[] = [];
    for (let i = 0; i < 25; i++) outcomes.push(...(await Promise.allSettled([trail.append(record(i))])));
    expect(outcomes.every((o) => o.status === "rejected")).toBe(true);
    expect(log.lines().filter((l) => l.level === 50).length).toBe(10);
  });
});
