import http2 from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminAuth } from "../support/credentials.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { fetchAnswer } from "./wire.js";

// Bugs the properties found, each as the smallest input that shows it, marked `it.fails` until it is fixed (the
// fix then makes vitest report the test as passing unexpectedly: remove `.fails`, and the filter that keeps the
// input out of the properties, `meetsBug1`/`meetsBug2` in arbitraries.ts). Both call paths.

function frame(message: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

interface StreamResult {
  status: number | undefined;
  grpcStatus: string | undefined;
  // When the stream closed, in ms from the request; undefined if it was still open at the end.
  closedAfterMs: number | undefined;
}

function h2Call(url: string, headers: http2.OutgoingHttpHeaders, body: Buffer, waitMs: number): Promise<StreamResult> {
  return new Promise((resolve) => {
    const session = http2.connect(url, { maxSessionMemory: 1024 });
    session.on("error", () => {});
    const started = performance.now();
    const result: StreamResult = { status: undefined, grpcStatus: undefined, closedAfterMs: undefined };
    const stream = session.request(headers, { endStream: false });
    stream.on("response", (h) => {
      result.status = Number(h[":status"]);
      result.grpcStatus ??= h["grpc-status"] as string | undefined;
    });
    stream.on("trailers", (t) => (result.grpcStatus = t["grpc-status"] as string | undefined));
    stream.on("data", () => {});
    stream.on("error", () => {});
    const done = (): void => {
      clearTimeout(timer);
      // A copy: destroying the session closes the stream after this.
      resolve({ ...result });
      session.destroy();
    };
    stream.on("close", () => {
      result.closedAfterMs = performance.now() - started;
      done();
    });
    const timer = setTimeout(done, waitMs);
    stream.end(body);
  });
}

describe.each(["direct", "connect"])("bugs found by the properties, CALL_PATH=%s", (callPath) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ env: { CALL_PATH: callPath } });
  });
  afterAll(() => server.stop());

  // Bug 1: gRPC and gRPC-web in the JSON codec (application/grpc+json, application/grpc-web+json). A message that
  // is not JSON, failing at a character outside the BMP, here "😀" (F0 9F 98 80): connect-node's error message
  // quotes the character JSON.parse stopped at, one UTF-16 unit of it, a lone surrogate; its setTrailerStatus
  // then throws URIError from encodeURIComponent while writing grpc-message, inside the protocol handler, before
  // our wrapper can complete the status. The call ends with no status at all: over HTTP/2 the stream is reset
  // (no headers, RST_STREAM NO_ERROR), over HTTP/1.1 the socket is closed; "a call failed outside its handler" is
  // logged at error level. Any method; the same on both call paths, which both leave these content types to
  // Connect. Expected: INVALID_ARGUMENT, MALFORMED_BODY, as for "x".
  it.fails("bug 1: a gRPC JSON message that fails to parse at an emoji gets INVALID_ARGUMENT, not a reset", async () => {
    const res = await h2Call(
      server.url,
      { ":method": "POST", ":path": "/kms.v1.KeyManagerService/Encrypt", "content-type": "application/grpc+json", te: "trailers", ...adminAuth(server.url) },
      frame(Buffer.from("😀")),
      5_000,
    );
    expect(res.status).toBe(200);
    expect(res.grpcStatus).toBe("3");
  });

  it.fails("bug 1: the same over gRPC-web on HTTP/1.1 gets a trailer frame, not a closed socket", async () => {
    const answer = await fetchAnswer(`${server.url}/kms.v1.KeyManagerService/Encrypt`, "POST", { "content-type": "application/grpc-web+json", ...adminAuth(server.url) }, frame(Buffer.from("😀")), 5_000);
    expect(answer.kind).toBe("answer");
  });

  // Bug 2: over HTTP/2, a HEAD request with a body larger than the stream window (1 MiB): the answer (405 for
  // /v1/keys) is sent, but the stream is not reset after it as it is for every other method
  // (src/transport/unread-body.ts resets on "wantTrailers", which a HEAD answer, sent with END_STREAM on its
  // headers, never raises). The client's upload is stalled by flow control, and the stream, its request and its
  // buffered megabyte stay until the request timeout (30 s) resets it: per stream what the oversized-stream fix
  // in docs/robustness.md removed for the other methods. Expected: closed right after the answer, as with GET.
  it.fails("bug 2: an HTTP/2 HEAD with a 2 MB body is closed right after its answer", async () => {
    const res = await h2Call(server.url, { ":method": "HEAD", ":path": "/v1/keys", "content-type": "application/json", ...adminAuth(server.url) }, Buffer.alloc(2_000_000), 3_000);
    expect(res.status).toBe(405);
    expect(res.closedAfterMs).toBeLessThan(1_000);
  });

  it("for comparison: the same request as GET is answered and its stream closed at once", async () => {
    const res = await h2Call(server.url, { ":method": "GET", ":path": "/v1/keys", "content-type": "application/json", ...adminAuth(server.url) }, Buffer.alloc(2_000_000), 3_000);
    expect(res.status).toBe(400);
    expect(res.closedAfterMs).toBeLessThan(1_000);
  });

  // Bug 3: a caller deadline longer than 2^31-1 ms (24.8 days), valid on both protocols (grpc-timeout
  // "99999999H", 8 digits; connect-timeout-ms "9999999999", 10 digits), ends a call that waits by design at
  // once. Methods whose policy says long_running get the caller's deadline uncapped
  // (src/pipeline/stages/deadline.ts), and a setTimeout over 2^31-1 ms fires after 1 ms (Node warns
  // TimeoutOverflowWarning); connect-node's own deadline timer has the same overflow. WaitTask on a running task
  // with `timeout: 2s`: with grpc-timeout 99999999H it answers DEADLINE_EXCEEDED within milliseconds; with
  // connect-timeout-ms 9999999999 it returns the task still RUNNING within milliseconds (its wait aborted).
  // Expected: the same as with grpc-timeout 10S, the task after its 2 s wait.
  describe("bug 3: deadlines over 2^31-1 ms", () => {
    const VDC = "6f1c2a4e-3b7d-4e59-9a0c-8d2f1e3b5a71";
    const CLUSTER = "b3e8d0f2-7c41-4a95-8e26-0f9d3c1a7b54";
    let slow: TestServer;
    let taskId = "";
    beforeAll(async () => {
      // The default catalog, and a provider slow enough that the task is still running while it is waited for.
      slow = await startServer({ env: { CALL_PATH: callPath, PROVIDER_DELAY_MS: "10000" } });
      const res = await fetch(`${slow.url}/cluster/v1/${VDC}/node-pools`, {
        method: "POST",
        headers: { "content-type": "application/json", ...adminAuth(slow.url) },
        body: JSON.stringify({ clusterId: CLUSTER, nodePoolName: "pool-1", nodeConfig: { computeFlavor: "cpu.4C.16G" }, scalePolicy: { fixedScale: { count: 1 } } }),
      });
      expect(res.status).toBe(200);
      taskId = ((await res.json()) as { task: { id: string } }).task.id;
    });
    afterAll(() => slow.stop());

    async function waitTask(header: Record<string, string>): Promise<{ ms: number; status: number; body: { code?: string; task?: { status: string } } }> {
      const started = performance.now();
      const res = await fetch(`${slow.url}/compute.cluster.v1.TaskService/WaitTask`, {
        method: "POST",
        headers: { "content-type": "application/json", ...adminAuth(slow.url), ...header },
        body: JSON.stringify({ serviceInstanceId: VDC, taskId, timeout: "2s" }),
      });
      return { status: res.status, body: (await res.json()) as { code?: string; task?: { status: string } }, ms: performance.now() - started };
    }

    it("for comparison: WaitTask with grpc-timeout 10S waits its 2 s", async () => {
      const res = await waitTask({ "grpc-timeout": "10S" });
      expect(res.status).toBe(200);
      expect(res.ms).toBeGreaterThan(1_900);
    });

    it.fails("WaitTask with grpc-timeout 99999999H waits its 2 s instead of DEADLINE_EXCEEDED at once", async () => {
      const res = await waitTask({ "grpc-timeout": "99999999H" });
      expect(res.body.code).toBeUndefined();
      expect(res.ms).toBeGreaterThan(1_900);
    });

    it.fails("WaitTask with connect-timeout-ms 9999999999 waits its 2 s", async () => {
      const res = await waitTask({ "connect-timeout-ms": "9999999999" });
      expect(res.status).toBe(200);
      expect(res.ms).toBeGreaterThan(1_900);
    });
  });
});
