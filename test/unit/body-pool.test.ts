import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { Call } from "../../src/pipeline/call.js";
import { BodyPool, MAX_POOLED_BYTES, MIN_POOLED_BYTES, capacityFor } from "../../src/transport/grpc/body-pool.js";
import { methodTableOf } from "../support/method-table.js";

describe("capacityFor", () => {
  it("rounds up to 2^k or 1.5 × 2^k bytes, from 32 KiB to 1 MiB", () => {
    expect(capacityFor(1)).toBe(MIN_POOLED_BYTES);
    expect(capacityFor(32 * 1024)).toBe(32 * 1024);
    expect(capacityFor(32 * 1024 + 1)).toBe(48 * 1024);
    // A 64 KiB Encrypt: its plaintext, the key id and the envelope.
    expect(capacityFor(65_536 + 40)).toBe(96 * 1024);
    expect(capacityFor(96 * 1024 + 1)).toBe(128 * 1024);
    expect(capacityFor(MAX_POOLED_BYTES)).toBe(MAX_POOLED_BYTES);
  });

  it("gives a body larger than the pool's buffers exactly its size", () => {
    expect(capacityFor(MAX_POOLED_BYTES + 1)).toBe(MAX_POOLED_BYTES + 1);
  });

  it("never gives less than asked, nor more than half again, within the pooled sizes", () => {
    for (let bytes = MIN_POOLED_BYTES; bytes <= MAX_POOLED_BYTES; bytes += 997) {
      const capacity = capacityFor(bytes);
      expect(capacity).toBeGreaterThanOrEqual(bytes);
      expect(capacity).toBeLessThanOrEqual(Math.ceil(bytes * 1.5));
    }
  });
});

describe("BodyPool", () => {
  it("hands a buffer given back to the next call of its size class, and no other", () => {
    const pool = new BodyPool(1024 * 1024);
    const first = pool.take(40_000);
    expect(first.length).toBe(48 * 1024);
    pool.give(first);
    expect(pool.idleBytes).toBe(48 * 1024);
    expect(pool.take(100_000)).not.toBe(first);
    expect(pool.take(45_000)).toBe(first);
    expect(pool.idleBytes).toBe(0);
    expect(pool.take(45_000)).not.toBe(first);
  });

  it("keeps no more than its idle bound, and never a buffer larger than the pooled sizes", () => {
    const pool = new BodyPool(100 * 1024);
    const a = pool.take(60_000);
    const b = pool.take(60_000);
    pool.give(a);
    pool.give(b);
    expect(pool.idleBytes).toBe(64 * 1024);
    const large = pool.take(MAX_POOLED_BYTES + 10);
    expect(large.length).toBe(MAX_POOLED_BYTES + 10);
    pool.give(large);
    expect(pool.idleBytes).toBe(64 * 1024);
    expect(pool.take(60_000)).toBe(a);
  });
});

// The adapter gives a body's buffer back only when the handler returned: one whose promise is still pending may
// read the request later (a call its deadline answered keeps running).
describe("Call.handlerReturned", () => {
  const request = create(KeyManagerService.method.getCryptoKey.input, { keyId: "k" });

  async function run(handler: () => unknown): Promise<boolean> {
    const table = methodTableOf([KeyManagerService], { getCryptoKey: handler as never });
    const entry = table.of(KeyManagerService.method.getCryptoKey);
    const call = new Call(entry, "grpc", request, { get: () => undefined }, null, null, null);
    try {
      await entry.invoke!(call);
    } catch {
      // A handler's failure is the case under test, not the test's.
    }
    return call.handlerReturned;
  }

  it("is set when the handler answered in its turn", async () => {
    expect(await run(() => create(KeyManagerService.method.getCryptoKey.output))).toBe(true);
  });

  it("is not set when it answered with a promise, even one that has settled", async () => {
    expect(await run(() => Promise.resolve(create(KeyManagerService.method.getCryptoKey.output)))).toBe(false);
  });

  it("is not set when it threw", async () => {
    expect(
      await run(() => {
        throw new Error("refused");
      }),
    ).toBe(false);
  });
});
