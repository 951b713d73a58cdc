import { join } from "node:path";
import type { BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code } from "@connectrpc/connect";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { storeSnapshot } from "../support/store-snapshot.js";
import { launchChromium } from "./chromium.js";
import { servePage } from "./page-server.js";
import type { CrossOriginResult } from "./cross-origin-page.js";

// Issue 13: a page of another origin calls the API from Chromium through CORS, with connect-web's gRPC-web and
// Connect transports. The server lets in the origin listed in CORS_ALLOWED_ORIGINS (its page's calls succeed and
// may read x-request-id), and nothing else: the same page from an origin not listed is stopped by the browser, and
// nothing is stored.

describe("cross-origin calls from Chromium (CORS)", () => {
  let pages: { port: number; close(): Promise<void> };
  let pagePort = 0;
  let server: TestServer;
  let browser: { context: BrowserContext; close(): Promise<void> };

  beforeAll(async () => {
    pages = await servePage(join("test", "browser", "cross-origin-page.ts"), "elsewhere");
    pagePort = pages.port;
    // Allowed: the pages as http://localhost:<port>; the same pages as http://127.0.0.1:<port> are another origin.
    server = await startServer({ env: { CORS_ALLOWED_ORIGINS: `http://localhost:${pagePort}` } });
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await pages?.close();
  });

  async function callFrom(origin: string, protocol: "grpc-web" | "connect", name: string): Promise<CrossOriginResult> {
    const page = await browser.context.newPage();
    try {
      await page.goto(`${origin}/`);
      await page.waitForFunction(() => typeof window.callApi === "function");
      // The API server is at 127.0.0.1:<its port>: another origin than either page's.
      return await page.evaluate(([url, token, p, n]) => window.callApi(url, token, p, n), [server.url, server.token, protocol, name] as const);
    } finally {
      await page.close();
    }
  }

  for (const protocol of ["grpc-web", "connect"] as const) {
    it(`an allowed origin calls over ${protocol}, and reads the exposed x-request-id`, async () => {
      const result = await callFrom(`http://localhost:${pagePort}`, protocol, `from-${protocol}`);
      expect(result).toEqual({ ok: true, detail: `version 1: hello over ${protocol}`, requestId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
      console.log(`browser: cross-origin ${protocol} from http://localhost:${pagePort} to ${server.url}: ${result.detail}`);
    });

    it(`an origin not allowed is stopped by the browser over ${protocol}, and nothing is stored`, async () => {
      const before = storeSnapshot(server.dataDir);
      const result = await callFrom(`http://127.0.0.1:${pagePort}`, protocol, `refused-${protocol}`);
      expect(result.ok).toBe(false);
      // A fetch the browser refused: connect-web sees no response at all.
      expect(result.detail).toMatch(new RegExp(`^${Code.Unknown} .*Failed to fetch`));
      const after = storeSnapshot(server.dataDir);
      delete before["compute_workers"];
      delete after["compute_workers"];
      expect(after).toEqual(before);
      console.log(`browser: cross-origin ${protocol} from http://127.0.0.1:${pagePort} (not in CORS_ALLOWED_ORIGINS) refused by Chromium: ${result.detail}`);
    });
  }
});
