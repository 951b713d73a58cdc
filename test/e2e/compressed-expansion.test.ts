import http2 from "node:http2";
import { brotliCompressSync, gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { grpcCall } from "../hostile/refusals.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// A compressed request may expand to 64 times its size or 256 KiB, whichever is more (src/transport/compression.ts),
// not to the 4 MiB of any request: connect-node decompresses and decodes a message before the pipeline authenticates
// its call, and 35 bytes of brotli cost as much as 4 MiB (60-95 ms of CPU each, for anyone without credentials; a
// probe, 2026-11-28). Every real request of the API fits the floor.

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server.stop());

const EXPANDS = "a compressed request may expand to 64 times its size or 256 KiB, whichever is more; send a larger one uncompressed";

// A Connect JSON call with a compressed body, over HTTP/2.
function connectCompressed(path: string, body: Buffer, encoding: "gzip" | "br", auth: boolean): Promise<{ status: number; json: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(server.url);
    session.on("error", reject);
    const headers = { ":method": "POST", ":path": path, "content-type": "application/json", "connect-protocol-version": "1", "content-encoding": encoding, "accept-encoding": "identity" };
    const req = session.request(auth ? { ...headers, authorization: `Bearer ${server.token}` } : headers);
    let status = 0;
    let text = "";
    req.on("response", (h) => (status = Number(h[":status"])));
    req.on("data", (chunk: Buffer) => (text += chunk.toString()));
    req.on("end", () => {
      session.close();
      resolve({ status, json: JSON.parse(text) as Record<string, unknown> });
    });
    req.end(body);
  });
}

describe("a compressed request", () => {
  it("that expands past its bound is refused before it is decoded, on Connect and gRPC, with or without credentials", async () => {
    const flood = Buffer.from(`{"parentId":"${"a".repeat(4 * 1024 * 1024 - 20)}"}`);
    const br = brotliCompressSync(flood);
    expect(br.length).toBeLessThan(100);
    for (const auth of [false, true]) {
      const answer = await connectCompressed("/kms.v1.KeyManagerService/CreateCryptoKey", br, "br", auth);
      expect(answer.status).toBe(429);
      expect(answer.json).toMatchObject({ code: "resource_exhausted" });
      expect(String(answer.json.message)).toBe(`the request's ${br.length} compressed bytes expand past 262144: ${EXPANDS}`);
    }
    // Field 1 (parent_id) of 4 MiB, gzip-compressed in its envelope.
    const message = Buffer.concat([Buffer.from([0x0a, 0x80, 0x80, 0x80, 0x02]), Buffer.alloc(4 * 1024 * 1024 - 16, 0x61)]);
    const grpc = await grpcCall(server.url, "/kms.v1.KeyManagerService/CreateCryptoKey", message, { gzip: true });
    expect({ code: grpc.code, reason: grpc.reason }).toEqual({ code: 8, reason: "REQUEST_TOO_LARGE" });
    const gzipped = gzipSync(message).length;
    expect(grpc.message).toBe(`the request's ${gzipped} compressed bytes expand past ${Math.max(262144, gzipped * 64)}: ${EXPANDS}`);
  });

  it("within its bound is served: the largest Encrypt there is, of zeros, compressed a thousandfold", async () => {
    const key = (await (
      await fetch(`${server.url}/v1/keys`, { method: "POST", headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" }, body: '{"parentId":"zip"}' })
    ).json()) as { id: string };
    const zeros = Buffer.alloc(64 * 1024).toString("base64");
    const body = Buffer.from(JSON.stringify({ keyId: key.id, keyVersionId: 1, plaintext: zeros, additionalAuthenticatedData: zeros }));
    for (const encoding of ["gzip", "br"] as const) {
      const compressed = encoding === "gzip" ? gzipSync(body) : brotliCompressSync(body);
      expect(body.length / compressed.length).toBeGreaterThan(64);
      const answer = await connectCompressed("/kms.v1.KeyManagerService/Encrypt", compressed, encoding, true);
      expect({ encoding, status: answer.status, keyVersionId: answer.json.keyVersionId }).toEqual({ encoding, status: 200, keyVersionId: 1 });
    }
  });
});
