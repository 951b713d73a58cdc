import { stat } from "node:fs";
import { describe, expect, it, vi } from "vitest";
import { DomainError } from "../../src/errors/domain-error.js";
import type { Call } from "../../src/pipeline/call.js";
import { MAX_DEADLINE_MS, callerTimeout, deadlineMs, deadlineStage, parseTimeout } from "../../src/pipeline/stages/deadline.js";
import { capTimeoutHeaders } from "../../src/transport/connect/timeout-headers.js";

const MAX_CALL_MS = 60_000;

// Just what the deadline stage reads and writes of a call.
function callOf(headers: Record<string, string>, longRunning: boolean): Call & { aborted: boolean } {
  const call = {
    headers: { get: (name: string) => headers[name] },
    entry: { policy: { permission: "", longRunning, domain: "compute" } },
    started: performance.now(),
    deadline: undefined as number | undefined,
    aborted: false,
    abort() {
      call.aborted = true;
    },
  };
  return call as unknown as Call & { aborted: boolean };
}

const later = (ms: number): Promise<string> => new Promise((resolve) => setTimeout(() => resolve("done"), ms));

describe("deadlineMs: what docs/pipeline.md says of the deadline stage", () => {
  it("holds a call to the caller's deadline, never later than the server's maximum", () => {
    expect(deadlineMs(1_000, MAX_CALL_MS, false)).toBe(1_000);
    expect(deadlineMs(600_000, MAX_CALL_MS, false)).toBe(MAX_CALL_MS);
    expect(deadlineMs(undefined, MAX_CALL_MS, false)).toBe(MAX_CALL_MS);
  });

  it("holds a long_running method to its caller's deadline alone, and to none when the caller sets none", () => {
    expect(deadlineMs(600_000, MAX_CALL_MS, true)).toBe(600_000);
    expect(deadlineMs(1_000, MAX_CALL_MS, true)).toBe(1_000);
    expect(deadlineMs(undefined, MAX_CALL_MS, true)).toBeUndefined();
  });

  it("caps every deadline at MAX_DEADLINE_MS, which a Node timer holds", () => {
    expect(MAX_DEADLINE_MS).toBeLessThanOrEqual(2 ** 31 - 1);
    expect(deadlineMs(99_999_999 * 3_600_000, MAX_CALL_MS, true)).toBe(MAX_DEADLINE_MS);
    expect(deadlineMs(9_999_999_999, MAX_CALL_MS, true)).toBe(MAX_DEADLINE_MS);
    expect(deadlineMs(9_999_999_999, MAX_CALL_MS, false)).toBe(MAX_CALL_MS);
  });
});

describe("deadlineStage", () => {
  it("lets a long_running call with a deadline of 11,000 years finish instead of cutting it after 1 ms", async () => {
    const call = callOf({ "grpc-timeout": "99999999H" }, true);
    await expect(deadlineStage(MAX_CALL_MS)(call, () => later(50))).resolves.toBe("done");
    expect(call.aborted).toBe(false);
    expect(call.deadline! - call.started).toBeCloseTo(MAX_DEADLINE_MS, 0);
  });

  it("answers DEADLINE_EXCEEDED and aborts the call at a short deadline", async () => {
    const call = callOf({ "connect-timeout-ms": "20" }, true);
    const outcome = deadlineStage(MAX_CALL_MS)(call, () => later(2_000));
    await expect(outcome).rejects.toBeInstanceOf(DomainError);
    await expect(outcome).rejects.toMatchObject({ detail: { reason: "DEADLINE_EXCEEDED" } });
    expect(call.aborted).toBe(true);
  });

  it("arms no timer for calls that end within the turn of the event loop they started in, and still cuts the others", async () => {
    const stage = deadlineStage(MAX_CALL_MS);
    const setTimer = vi.spyOn(globalThis, "setTimeout");
    try {
      const slow = callOf({ "grpc-timeout": "30m" }, false);
      // Started in an I/O callback, as calls are (a request read from a socket), so that the turn's setImmediate
      // callbacks come before the next turn's timers however long the turn takes.
      const { quick, batched, cut } = await new Promise<{ quick: unknown[]; batched: unknown; cut: unknown }>((resolve) =>
        stat(".", () =>
          resolve({
            quick: Array.from({ length: 3 }, () => stage(callOf({ "grpc-timeout": "1S" }, false), () => Promise.resolve("quick"))),
            // A call that ends in a setImmediate of its turn is quick too (an Encrypt's audit batch).
            batched: stage(callOf({ "grpc-timeout": "1S" }, false), () => new Promise((done) => setImmediate(() => done("batched")))),
            cut: stage(slow, () => later(2_000)),
          }),
        ),
      );
      expect(await Promise.all([...quick, batched])).toEqual(["quick", "quick", "quick", "batched"]);
      await expect(cut).rejects.toMatchObject({ detail: { reason: "DEADLINE_EXCEEDED" } });
      expect(slow.aborted).toBe(true);
      // The quick calls' deadlines (1 s) were never armed; the slow call's (30 ms) was, or it would not have been cut.
      const delays = setTimer.mock.calls.map((args) => args[1] ?? 0);
      expect(delays.filter((ms) => ms > 900 && ms <= 1_000)).toEqual([]);
      expect(performance.now() - slow.started).toBeLessThan(1_000);
    } finally {
      setTimer.mockRestore();
    }
  });

  it("sets no deadline on a long_running call whose caller set none", () => {
    const call = callOf({}, true);
    expect(deadlineStage(MAX_CALL_MS)(call, () => "sync")).toBe("sync");
    expect(call.deadline).toBeUndefined();
  });
});

describe("timeout headers", () => {
  it("are read as their protocol has them: grpc-timeout first, then connect-timeout-ms", () => {
    expect(parseTimeout("grpc-timeout", "5S")).toBe(5_000);
    expect(parseTimeout("grpc-timeout", "123456789S")).toBeUndefined();
    expect(parseTimeout("connect-timeout-ms", "9999999999")).toBe(9_999_999_999);
    expect(parseTimeout("connect-timeout-ms", "-1")).toBeUndefined();
    expect(callerTimeout({ get: (n) => ({ "grpc-timeout": "1S", "connect-timeout-ms": "abc" })[n] })).toEqual({ header: "grpc-timeout", ms: 1_000 });
    expect(callerTimeout({ get: (n) => ({ "connect-timeout-ms": "abc" })[n] })).toEqual({ header: "connect-timeout-ms", ms: undefined });
    expect(callerTimeout({ get: () => undefined })).toBeUndefined();
  });

  it("are capped at MAX_DEADLINE_MS, exactly, before Connect arms its own timer; others are left alone", () => {
    const headers = new Headers({ "grpc-timeout": "99999999H", "connect-timeout-ms": "9999999999" });
    capTimeoutHeaders(headers);
    expect(parseTimeout("grpc-timeout", headers.get("grpc-timeout")!)).toBe(MAX_DEADLINE_MS);
    expect(parseTimeout("connect-timeout-ms", headers.get("connect-timeout-ms")!)).toBe(MAX_DEADLINE_MS);
    for (const [name, value] of [["grpc-timeout", "10S"], ["grpc-timeout", "abc"], ["connect-timeout-ms", "2147483000"], ["connect-timeout-ms", "-1"]] as const) {
      const kept = new Headers({ [name]: value });
      capTimeoutHeaders(kept);
      expect(kept.get(name)).toBe(value);
    }
  });
});
