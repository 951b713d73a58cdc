import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PROPERTY_TEST_TIMEOUT_MS, checkProperty, healthProblems, startPropertyServer, stopPropertyServer } from "./harness.js";
import type { PropertyServer } from "./harness.js";
import { grpcWeb } from "./properties.js";

// gRPC-web over HTTP/1.1 (fetch) and HTTP/2: the gRPC property's envelopes and headers under the gRPC-web content
// types (the text form, which is not served, included). The status in the trailer frame follows the gRPC rules.

describe.each(["direct", "connect"])("gRPC-web properties, CALL_PATH=%s", (callPath) => {
  let ps: PropertyServer | undefined;
  beforeAll(async () => {
    ps = await startPropertyServer(callPath);
  });
  afterAll(() => stopPropertyServer(ps));
  afterEach(async () => {
    expect(await healthProblems(ps!)).toEqual([]);
  });

  it("answers any envelope and header with a trailer frame whose status is no server fault", async () => {
    await checkProperty(grpcWeb, ps!);
  }, PROPERTY_TEST_TIMEOUT_MS);
});
