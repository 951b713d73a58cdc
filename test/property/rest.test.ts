import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PROPERTY_TEST_TIMEOUT_MS, checkProperty, healthProblems, startPropertyServer, stopPropertyServer } from "./harness.js";
import type { PropertyServer } from "./harness.js";
import { rest } from "./properties.js";

// REST: random methods, paths (the real route templates with their segments mutated, percent escapes, verbs,
// unicode, very long), query strings and bodies (request messages as JSON, any JSON, any bytes, wrong content
// types and encodings), over HTTP/1.1 (fetch) and HTTP/2. Never a 5xx; every refusal a JSON google.rpc.Status
// with an ErrorInfo and the HTTP status of its code; a refused request changes nothing in the store.

describe.each(["direct", "connect"])("REST properties, CALL_PATH=%s", (callPath) => {
  let ps: PropertyServer | undefined;
  beforeAll(async () => {
    ps = await startPropertyServer(callPath);
  });
  afterAll(() => stopPropertyServer(ps));
  afterEach(async () => {
    expect(await healthProblems(ps!)).toEqual([]);
  });

  it("answers any method, path, query and body without a 5xx, refusals as google.rpc.Status", async () => {
    await checkProperty(rest, ps!);
  }, PROPERTY_TEST_TIMEOUT_MS);
});
