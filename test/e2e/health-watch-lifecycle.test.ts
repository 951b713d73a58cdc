import grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { startServer } from "../support/server.js";

// A health Watch is open by design for as long as its caller wants: it is not dropped when its connection carries no
// frame for the idle timeout (a watch writes only when a status changes), and a graceful shutdown tells it
// NOT_SERVING, then ends it with UNAVAILABLE, instead of dropping its connection (a probe, 2026-11-27: cut after
// 90 s without a deadline, and "Connection dropped" with no NOT_SERVING at SIGTERM).

const SERVICE = "kms.v1.KeyManagerService";

type Update = { status: string } | { error: grpc.ServiceError } | { end: true };

// A Watch whose messages and end arrive in order, each awaited with next().
function watch(port: number) {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const serialize = (req: { service: string }): Buffer => {
    const name = Buffer.from(req.service);
    return Buffer.concat([Buffer.from([0x0a, name.length]), name]);
  };
  // HealthCheckResponse: field 1, the status as a varint.
  const deserialize = (bytes: Buffer): { status: string } => ({ status: ServingStatus[bytes.length >= 2 ? bytes[1]! : 0] ?? "?" });
  const call = client.makeServerStreamRequest("/grpc.health.v1.Health/Watch", serialize, deserialize, { service: SERVICE });
  const updates: Update[] = [];
  let waiting: (() => void) | null = null;
  const push = (u: Update): void => {
    updates.push(u);
    waiting?.();
  };
  call.on("data", (d: { status: string }) => push(d));
  call.on("error", (error: grpc.ServiceError) => push({ error }));
  call.on("end", () => push({ end: true }));
  return {
    async next(): Promise<Update> {
      while (updates.length === 0) await new Promise<void>((resolve) => (waiting = resolve));
      return updates.shift()!;
    },
    close(): void {
      call.cancel();
      client.close();
    },
  };
}

describe("a health Watch", () => {
  it("without a deadline outlives its connection's idle timeout and the request timeout", async () => {
    const server = await startServer({ env: { IDLE_TIMEOUT_SECONDS: "1", REQUEST_TIMEOUT_SECONDS: "1", HEADERS_TIMEOUT_SECONDS: "1" } });
    const watcher = watch(server.port);
    try {
      expect(await watcher.next()).toEqual({ status: "SERVING" });
      // Three idle timeouts and more without a frame; before, the session got a GOAWAY after 1 s and was dropped 1 s later.
      await new Promise((resolve) => setTimeout(resolve, 3500));
      server.app.health.set(SERVICE, ServingStatus.NOT_SERVING);
      expect(await watcher.next()).toEqual({ status: "NOT_SERVING" });
    } finally {
      watcher.close();
      await server.stop();
    }
  });

  it("is told NOT_SERVING at a graceful shutdown, then ends with UNAVAILABLE", async () => {
    const server = await startServer();
    const watcher = watch(server.port);
    expect(await watcher.next()).toEqual({ status: "SERVING" });
    const stopped = server.stop();
    expect(await watcher.next()).toEqual({ status: "NOT_SERVING" });
    const end = await watcher.next();
    expect("error" in end ? { code: end.error.code, details: end.error.details } : end).toEqual({
      code: grpc.status.UNAVAILABLE,
      details: "the server is shutting down",
    });
    await stopped;
    watcher.close();
  });
});
