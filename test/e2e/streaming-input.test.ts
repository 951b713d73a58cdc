import http2 from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// A server-streaming call whose request breaks the protocol is the caller's doing: connect-node refuses it inside
// the call (it reads a streaming call's input there), and the pipeline answered such a refusal INTERNAL, with an
// error line and its stack for each: an anonymous client wrote 1 MB of error log a second with empty health Watches
// (a probe, 2026-11-28). Now it is answered with connect-node's own code, and logged as any refusal (not at error).

let server: TestServer;
beforeAll(async () => {
  server = await startServer({ env: { LOG_LEVEL: "info" } });
});
afterAll(() => server.stop());

// A gRPC Watch with no message at all: the headers, then the end of the stream.
function emptyWatch(): Promise<Record<string, string | string[] | undefined>> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(server.url);
    session.on("error", reject);
    const stream = session.request({ ":method": "POST", ":path": "/grpc.health.v1.Health/Watch", "content-type": "application/grpc", te: "trailers" });
    let headers: Record<string, string | string[] | undefined> = {};
    stream.on("response", (h) => (headers = { ...h }));
    stream.on("trailers", (t) => (headers = { ...headers, ...t }));
    stream.on("data", () => {});
    stream.on("close", () => {
      session.close();
      resolve(headers);
    });
    stream.end();
  });
}

describe("a streaming call without its message", () => {
  it("is answered UNIMPLEMENTED, as the protocol has it, and logs no error", async () => {
    const answers = await Promise.all(Array.from({ length: 20 }, emptyWatch));
    for (const answer of answers) {
      expect({ status: answer["grpc-status"], message: decodeURIComponent(String(answer["grpc-message"])) }).toEqual({
        status: "12",
        message: "protocol error: missing input message for server-streaming method",
      });
    }
    const errors = server.logs().split("\n").filter((line) => line.includes('"level":50'));
    expect(errors).toEqual([]);
  });
});
