import { Registry } from "prom-client";
import type { Metric } from "prom-client";
import { describe, expect, it } from "vitest";
import { KeyManagerService } from "../../gen/kms/v1/kms_pb.js";
import { callDurationHistogram } from "../../src/metrics/call-duration.js";
import { CallTallies, DURATION_BUCKETS_S } from "../../src/metrics/call-tally.js";
import { methodTableOf } from "../support/method-table.js";

// The plain counts the metrics stage keeps, and the histogram Prometheus reads from them.

const table = methodTableOf([KeyManagerService]);
const encrypt = table.byPath("/kms.v1.KeyManagerService/Encrypt")!;
const decrypt = table.byPath("/kms.v1.KeyManagerService/Decrypt")!;

describe("call tallies", () => {
  it("keeps one tally per method and protocol, created on first use", () => {
    const tallies = new CallTallies();
    const a = tallies.of(encrypt, "grpc");
    expect(tallies.of(encrypt, "grpc")).toBe(a);
    expect(tallies.of(encrypt, "rest")).not.toBe(a);
    expect(tallies.of(decrypt, "grpc")).not.toBe(a);
    expect(tallies.all().map((t) => `${t.service}/${t.method} ${t.protocol}`)).toEqual([
      "kms.v1.KeyManagerService/Encrypt grpc",
      "kms.v1.KeyManagerService/Encrypt rest",
      "kms.v1.KeyManagerService/Decrypt grpc",
    ]);
  });

  it("counts codes and puts a duration in the first bucket whose bound it does not exceed (le is inclusive)", () => {
    const t = new CallTallies().of(encrypt, "grpc");
    t.record(0, 0.0001);
    t.record(0, 0.00011);
    t.record(5, 61);
    // A code beyond google.rpc.Code is counted as UNKNOWN.
    t.record(99, 0.001);
    expect([...t.codes]).toEqual([2, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    expect(t.buckets[0]).toBe(1);
    expect(t.buckets[1]).toBe(1);
    expect(t.buckets[DURATION_BUCKETS_S.indexOf(0.001)]).toBe(1);
    expect(t.buckets[DURATION_BUCKETS_S.length]).toBe(1);
    expect(t.count).toBe(4);
    expect(t.seconds).toBeCloseTo(61.00121, 9);
  });

  it("is rendered as a Prometheus histogram with cumulative buckets, sum and count", async () => {
    const tallies = new CallTallies();
    const t = tallies.of(encrypt, "connect");
    t.record(0, 0.0002);
    t.record(0, 0.003);
    t.record(3, 100);
    const registry = new Registry();
    registry.registerMetric(callDurationHistogram(tallies) as unknown as Metric);
    const text = await registry.metrics();
    const labels = 'service="kms.v1.KeyManagerService",method="Encrypt",protocol="connect"';
    expect(text).toContain("# TYPE cloudplane_call_duration_seconds histogram");
    expect(text).toContain(`cloudplane_call_duration_seconds_bucket{${labels},le="0.0001"} 0`);
    expect(text).toContain(`cloudplane_call_duration_seconds_bucket{${labels},le="0.00025"} 1`);
    expect(text).toContain(`cloudplane_call_duration_seconds_bucket{${labels},le="0.005"} 2`);
    expect(text).toContain(`cloudplane_call_duration_seconds_bucket{${labels},le="60"} 2`);
    expect(text).toContain(`cloudplane_call_duration_seconds_bucket{${labels},le="+Inf"} 3`);
    expect(text).toContain(`cloudplane_call_duration_seconds_count{${labels}} 3`);
    expect(text).toContain(`cloudplane_call_duration_seconds_sum{${labels}} 100.0032`);
  });
});
