import http2 from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// Calls open by design (health Watch, streaming reflection) need no credentials and are exempt from the idle and
// request timeouts, at about 55 KB each: 10,240 Watches took 514 MB, and a server with a 256 MB heap died of them
// (a probe, 2026-11-28). The server holds MAX_LONG_LIVED_CALLS of them, MAX_LONG_LIVED_CALLS_PER_CONNECTION on one
// connection, and refuses more with RESOURCE_EXHAUSTED in their protocol, before any handler.

let server: TestServer;
beforeAll(async () => {
  server = await startServer({ env: { MAX_LONG_LIVED_CALLS: "4", MAX_LONG_LIVED_CALLS_PER_CONNECTION: "2" } });
});
afterAll(() => server.stop());

interface Watch {
  // The first answer: "message" once the Watch sent its status, or the gRPC status it ended with.
  first: Promise<string>;
  stream: http2.ClientHttp2Stream;
}

// A gRPC Watch of the server's overall health (an empty request message).
function watch(session: http2.ClientHttp2Session): Watch {
  const stream = session.request({ ":method": "POST", ":path": "/grpc.health.v1.Health/Watch", "content-type": "application/grpc", te: "trailers" });
  const first = new Promise<string>((resolve) => {
    let headers: http2.IncomingHttpHeaders = {};
    stream.on("response", (h) => (headers = h));
    stream.once("data", () => resolve("message"));
    stream.on("trailers", (t) => resolve(`${String(t["grpc-status"] ?? headers["grpc-status"])} ${decodeURIComponent(String(t["grpc-message"] ?? ""))}`));
    stream.on("close", () => resolve(`closed ${String(headers["grpc-status"])}`));
  });
  stream.on("error", () => {});
  stream.end(Buffer.from([0, 0, 0, 0, 0]));
  return { first, stream };
}

describe("calls open by design", () => {
  it("are held up to the limits per connection and per server; past them refused, and admitted again once one ends", async () => {
    const refused = "8 this server holds at most 4 open health watches and reflection streams, 2 on one connection: close one, or retry later";
    const a = http2.connect(server.url);
    const b = http2.connect(server.url);
    const c = http2.connect(server.url);
    try {
      const onA = [watch(a), watch(a)];
      expect(await Promise.all(onA.map((w) => w.first))).toEqual(["message", "message"]);
      expect(await watch(a).first).toBe(refused);
      const onB = [watch(b), watch(b)];
      expect(await Promise.all(onB.map((w) => w.first))).toEqual(["message", "message"]);
      // Another connection, but the server holds four.
      expect(await watch(c).first).toBe(refused);
      // Over plain HTTP the refusal's RetryInfo is also Retry-After, as for every refusal (docs/errors.md); it had
      // none on Connect and gRPC-web (a probe of the docs, 2026-11-28).
      const envelope = Buffer.from([0, 0, 0, 0, 0]);
      const forms: Record<string, string>[] = [{ "content-type": "application/grpc-web+proto" }, { "content-type": "application/connect+proto", "connect-protocol-version": "1" }];
      for (const headers of forms) {
        const answer = await fetch(`${server.url}/grpc.health.v1.Health/Watch`, { method: "POST", headers, body: envelope });
        expect({ type: headers["content-type"], retryAfter: answer.headers.get("retry-after") }).toEqual({ type: headers["content-type"], retryAfter: "1" });
        await answer.arrayBuffer();
      }
      // A unary call is not one of them.
      const check = c.request({ ":method": "POST", ":path": "/grpc.health.v1.Health/Check", "content-type": "application/grpc", te: "trailers" });
      const checked = new Promise<string>((resolve) => check.on("trailers", (t) => resolve(String(t["grpc-status"]))));
      check.on("data", () => {});
      check.end(Buffer.from([0, 0, 0, 0, 0]));
      expect(await checked).toBe("0");
      // One ends: the next is admitted.
      const closed = new Promise((resolve) => onA[0]!.stream.once("close", resolve));
      onA[0]!.stream.close(http2.constants.NGHTTP2_CANCEL);
      await closed;
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await watch(c).first).toBe("message");
    } finally {
      for (const session of [a, b, c]) session.destroy();
    }
  });
});
