import { join } from "node:path";
import type { BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { launchChromium } from "./chromium.js";
import { servePage } from "./page-server.js";
import type { GrpcWebClientResult } from "./grpc-web-client-page.js";

// The grpc-web JavaScript client (the `grpc-web` package, what protoc-gen-grpc-web's stubs run on) in Chromium, in
// its default text mode: a page of an allowed origin creates a key, encrypts and decrypts, is refused a cut
// ciphertext with the code and message every other protocol gives, and reads the first message of a server stream
// (docs/callers.md).

describe("the grpc-web client in Chromium, text mode", () => {
  let pages: { port: number; close(): Promise<void> };
  let pagePort = 0;
  let server: TestServer;
  let browser: { context: BrowserContext; close(): Promise<void> };

  beforeAll(async () => {
    pages = await servePage(join("test", "browser", "grpc-web-client-page.ts"), "grpc-web");
    pagePort = pages.port;
    server = await startServer({ env: { CORS_ALLOWED_ORIGINS: `http://localhost:${pagePort}` } });
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await pages?.close();
  });

  it("calls unary methods and a server stream, and sees refusals as gRPC errors", async () => {
    const page = await browser.context.newPage();
    const sent: string[] = [];
    page.on("request", (req) => {
      if (req.method() === "POST") sent.push(`${new URL(req.url()).pathname} ${req.headers()["content-type"]}`);
    });
    let result: GrpcWebClientResult;
    try {
      await page.goto(`http://localhost:${pagePort}/`);
      await page.waitForFunction(() => typeof window.callWithGrpcWeb === "function");
      result = await page.evaluate(([url, token]) => window.callWithGrpcWeb(url, token), [server.url, server.token] as const);
    } finally {
      await page.close();
    }
    expect(result).toEqual({
      ok: true,
      detail:
        "hello in text mode | 3 ciphertext: invalid: it was altered or truncated, or was not made with this key and this additional authenticated data | watch 1",
    });
    // Every call went out in the text form.
    expect(sent).toEqual([
      "/kms.v1.KeyManagerService/CreateCryptoKey application/grpc-web-text",
      "/kms.v1.KeyManagerService/Encrypt application/grpc-web-text",
      "/kms.v1.KeyManagerService/Decrypt application/grpc-web-text",
      "/kms.v1.KeyManagerService/Decrypt application/grpc-web-text",
      "/grpc.health.v1.Health/Watch application/grpc-web-text",
    ]);
    console.log(`browser: grpc-web client (text mode) from http://localhost:${pagePort} to ${server.url}: ${result.detail}`);
  });
});
