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

// A caller that leaves while its stream is open: connect-node's reading of the stream's input then fails with Node's
// premature-close error, which was answered (to nobody) as INTERNAL, logged at error level with its stack and counted
// as an INTERNAL call: fifty disconnects of an unauthenticated client wrote 46 KB of error log (a probe, 2026-11-28).
describe("a streaming call whose caller goes away", () => {
  // The headers and one message, the stream left open, then the whole session dropped.
  function leave(path: string, message: Buffer): Promise<void> {
    return new Promise((resolve) => {
      const session = http2.connect(server.url);
      session.on("error", () => {});
      const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers" });
      stream.on("error", () => {});
      stream.write(message);
      setTimeout(() => {
        session.destroy();
        resolve();
      }, 30);
    });
  }

  it("is counted CANCELLED, not INTERNAL, and logs no error", async () => {
    const before = server.logs().length;
    // ServerReflectionRequest { list_services: "" } (field 7), in its envelope.
    const listServices = Buffer.from([0, 0, 0, 0, 2, 0x3a, 0]);
    for (let i = 0; i < 10; i++) {
      await leave("/grpc.health.v1.Health/Watch", Buffer.from([0, 0, 0, 0, 0]));
      await leave("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", listServices);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    const errors = server.logs().slice(before).split("\n").filter((line) => line.includes('"level":50'));
    expect(errors).toEqual([]);
    const metrics = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.token}` } })).text();
    const internal = metrics.split("\n").filter((line) => line.startsWith("cloudplane_calls_total") && line.includes('code="INTERNAL"'));
    expect(internal).toEqual([]);
    // Reflection's stream fails after the pipeline counted the call (its answers were on their way): only Watch's
    // failure is counted, as the code name google.rpc.Code gives it.
    expect(metrics).toContain('cloudplane_calls_total{service="grpc.health.v1.Health",method="Watch",protocol="grpc",code="CANCELLED"} 10\n');
  });
});
