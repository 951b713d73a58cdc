import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PROPERTY_TEST_TIMEOUT_MS, checkProperty, healthProblems, startPropertyServer, stopPropertyServer } from "./harness.js";
import type { PropertyServer } from "./harness.js";
import { grpcEnvelopes, grpcMessages } from "./properties.js";

// gRPC over raw HTTP/2, for every unary method of every served service (paths from the descriptors): arbitrary
// bytes and envelopes (valid, cut short, lying lengths, several messages, compressed flags with and without an
// encoding, trailing bytes), arbitrary grpc-timeout, grpc-encoding, x-request-id and credentials; and valid
// messages with random field values. Always a grpc-status, never INTERNAL or UNKNOWN; every error with a
// google.rpc.Status in grpc-status-details-bin of the same code, carrying an ErrorInfo.

describe.each(["direct", "connect"])("gRPC properties, CALL_PATH=%s", (callPath) => {
  let ps: PropertyServer | undefined;
  beforeAll(async () => {
    ps = await startPropertyServer(callPath);
  });
  afterAll(() => stopPropertyServer(ps));
  afterEach(async () => {
    expect(await healthProblems(ps!)).toEqual([]);
  });

  it("answers any envelope and header with a grpc-status that is no server fault", async () => {
    await checkProperty(grpcEnvelopes, ps!);
  }, PROPERTY_TEST_TIMEOUT_MS);

  it("answers valid messages of random field values without INTERNAL", async () => {
    await checkProperty(grpcMessages, ps!);
  }, PROPERTY_TEST_TIMEOUT_MS);
});
