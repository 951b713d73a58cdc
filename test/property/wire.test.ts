import http from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fetchAnswer, H2Client } from "./wire.js";

// The properties' clients report a hang with what came before it: three HTTP/1.1 calls of the million-input run
// went unanswered once and never again, and "hung" alone could not tell a server that never answered from a body
// that stopped. Servers that stall on purpose, one at each point.

const TIMEOUT_MS = 300;

describe("a hang says where the answer stopped", () => {
  let h1: http.Server;
  let h2: http2.Http2Server;
  let h1Url = "";
  let h2Url = "";

  beforeAll(async () => {
    // /silent never answers; /half sends its head and 5 bytes of a 10-byte body, then nothing.
    h1 = http.createServer((req, res) => {
      if (req.url === "/half") {
        res.writeHead(200, { "content-length": "10" });
        res.write("12345");
      }
    });
    h2 = http2.createServer();
    h2.on("stream", (stream, headers) => {
      if (headers[":path"] === "/half") {
        stream.respond({ ":status": 200 });
        stream.write("12345");
      }
    });
    await new Promise<void>((resolve) => h1.listen(0, "127.0.0.1", resolve));
    await new Promise<void>((resolve) => h2.listen(0, "127.0.0.1", resolve));
    h1Url = `http://127.0.0.1:${(h1.address() as AddressInfo).port}`;
    h2Url = `http://127.0.0.1:${(h2.address() as AddressInfo).port}`;
  });

  afterAll(() => {
    h1.closeAllConnections();
    h1.close();
    h2.close();
  });

  it("over HTTP/1.1 (fetch)", async () => {
    expect(await fetchAnswer(`${h1Url}/silent`, "GET", {}, undefined, TIMEOUT_MS)).toEqual({ kind: "hung", detail: "no response head" });
    expect(await fetchAnswer(`${h1Url}/half`, "GET", {}, undefined, TIMEOUT_MS)).toEqual({
      kind: "hung",
      detail: "HTTP 200 came, then the body stopped after 5 bytes",
    });
  });

  it("over HTTP/2", async () => {
    const client = new H2Client(h2Url, TIMEOUT_MS);
    try {
      expect(await client.request({ ":method": "POST", ":path": "/silent" }, Buffer.alloc(0))).toEqual({ kind: "hung", detail: "no response head" });
      expect(await client.request({ ":method": "POST", ":path": "/half" }, Buffer.alloc(0))).toEqual({
        kind: "hung",
        detail: "HTTP 200 came, then the body stopped after 5 bytes",
      });
    } finally {
      client.close();
    }
  });
});
