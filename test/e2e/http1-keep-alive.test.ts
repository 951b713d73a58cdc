import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminAuth } from "../support/credentials.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// An HTTP/1.1 keep-alive connection goes on serving after an answer given before the request's body was read
// whole. Found by the property runs (docs/robustness.md): a gRPC-web upload whose envelope declares more than
// the 4 MiB limit is refused after its first bytes; connect-node's reading then destroyed the request, the rest
// of the body was never read, the socket stayed stopped by backpressure, and the client's next request on the
// connection got no answer until the request timeout (408 after 30 s). A client (fetch, a browser) reuses the
// connection as soon as it has the answer, so the next call hung.

const MiB = 1024 * 1024;

// A connection that collects what the server sends.
class Connection {
  private readonly socket: net.Socket;
  received = "";

  constructor(port: number) {
    this.socket = net.connect(port, "127.0.0.1");
    this.socket.on("data", (d: Buffer) => (this.received += d.toString("latin1")));
    this.socket.on("error", () => {});
  }

  write(bytes: string | Buffer): void {
    this.socket.write(bytes);
  }

  // Resolves once what was received from `from` on satisfies `done`; rejects after `ms`.
  async until(from: number, done: (text: string) => boolean, ms: number): Promise<string> {
    const deadline = Date.now() + ms;
    while (!done(this.received.slice(from))) {
      if (Date.now() > deadline) throw new Error(`nothing more after ${ms} ms; received: ${JSON.stringify(this.received.slice(from, from + 300))}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    return this.received.slice(from);
  }

  close(): void {
    this.socket.destroy();
  }
}

// A gRPC-web Encrypt of `size` bytes whose envelope declares 2 GiB: refused as soon as its first bytes are read.
function oversizeEnvelopeRequest(authorization: string, size: number): Buffer {
  const body = Buffer.alloc(size);
  body.writeUInt32BE(0x7fffffff, 1);
  const head =
    "POST /kms.v1.KeyManagerService/Encrypt HTTP/1.1\r\nhost: a\r\ncontent-type: application/grpc-web+proto\r\nx-grpc-web: 1\r\n" +
    `authorization: ${authorization}\r\ncontent-length: ${size}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, "latin1"), body]);
}

describe("HTTP/1.1 keep-alive after an answer that left the body unread", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(async () => {
    await server.stop();
  });

  for (const size of [64 * 1024, 1 * MiB, 4 * MiB]) {
    it(`answers the next request on the connection after a ${size / 1024} KiB upload refused after its first bytes`, async () => {
      const connection = new Connection(server.port);
      try {
        connection.write(oversizeEnvelopeRequest(adminAuth(server.url).authorization, size));
        // The refusal: a gRPC-web answer, its status in the trailer frame, the connection kept open; the last chunk
        // of its chunked body ends it.
        const first = await connection.until(0, (t) => t.includes("\r\n0\r\n\r\n"), 5_000);
        expect(first).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
        expect(first).toContain("grpc-status: 8");
        expect(first).toContain("Connection: keep-alive");
        const before = connection.received.length;
        // As fetch does, once it has the answer: the next request on the same connection.
        connection.write("GET /healthz HTTP/1.1\r\nhost: a\r\n\r\n");
        const second = await connection.until(before, (t) => t.includes('{"status":"ok"}'), 5_000);
        expect(second).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      } finally {
        connection.close();
      }
    });
  }
});
