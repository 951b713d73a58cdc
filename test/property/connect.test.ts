import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PROPERTY_TEST_TIMEOUT_MS, checkProperty, healthProblems, startPropertyServer, stopPropertyServer } from "./harness.js";
import type { PropertyServer } from "./harness.js";
import { connectUnary } from "./properties.js";

// Connect unary (application/proto and application/json) over HTTP/1.1 and HTTP/2: request messages in binary
// and JSON, whole, cut short or compressed, any bytes, any JSON, around the 4 MiB limit; arbitrary
// connect-protocol-version, connect-timeout-ms, content-encoding and x-request-id; now and then another method
// or a content type Connect does not serve. Every error is Connect's error JSON with an ErrorInfo, its HTTP
// status the one of its code, never internal or unknown.

describe.each(["direct", "connect"])("Connect properties, CALL_PATH=%s", (callPath) => {
  let ps: PropertyServer | undefined;
  beforeAll(async () => {
    ps = await startPropertyServer(callPath);
  });
  afterAll(() => stopPropertyServer(ps));
  afterEach(async () => {
    expect(await healthProblems(ps!)).toEqual([]);
  });

  it("answers any body and header with a Connect error JSON that is no server fault", async () => {
    await checkProperty(connectUnary, ps!);
  }, PROPERTY_TEST_TIMEOUT_MS);
});
