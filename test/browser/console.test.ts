import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildConsole } from "../../scripts/build-console.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { ARTIFACTS, launchChromium } from "./chromium.js";

// Issue 13, "Must show": the operator console at /console, built with @connectrpc/connect-web from the generated
// stubs and bundled by esbuild, driven in Debian's headless Chromium: it asks for a token, shows a key with its
// versions (created, encrypting and decrypting a text), and a node pool whose task it watches until done.
// Screenshots go to test-artifacts/browser/.

const SI = "6f1c2a4e-3b7d-4e59-9a0c-8d2f1e3b5a71";
const CL = "b3e8d0f2-7c41-4a95-8e26-0f9d3c1a7b54";

describe("operator console in Chromium", () => {
  let server: TestServer;
  let browser: { context: BrowserContext; close(): Promise<void> };

  beforeAll(async () => {
    await buildConsole();
    // Nodes take a moment, so the console is seen watching a task that is not done yet.
    server = await startServer({ env: { PROVIDER_DELAY_MS: "400" } });
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  async function signedIn(token: string): Promise<Page> {
    const page = await browser.context.newPage();
    await page.goto(`${server.url}/console`);
    await page.fill("#token", token);
    await page.click("#signin button");
    return page;
  }

  it("refuses a wrong token and shows nothing", async () => {
    const page = await signedIn("cpat.wrong.token");
    await expect.poll(() => page.textContent("#error")).toContain("[unauthenticated]");
    expect(await page.isHidden("#app")).toBe(true);
    await page.close();
  });

  it("creates a key, shows its versions, encrypts and decrypts a text", async () => {
    const page = await signedIn(server.token);
    await page.waitForSelector("#app", { state: "visible" });
    await page.fill("#key-name", "console-key");
    await page.click("#key-create button");
    await page.waitForSelector("#versions tbody tr");
    await page.click("#version-create");
    await page.waitForSelector("#versions tbody tr:nth-child(2)");
    const versions = await page.$$eval("#versions tbody tr", (rows) => rows.map((r) => [...r.querySelectorAll("td")].slice(0, 3).map((td) => td.textContent)));
    expect(versions).toEqual([
      ["1", "ENABLED", "AES_256"],
      ["2", "ENABLED", "AES_256"],
    ]);
    expect(await page.textContent("#versions tbody tr:first-child td:last-child")).toBe("primary");
    await page.fill("#plaintext", "hello from the console");
    await page.click("#encrypt button");
    await expect.poll(() => page.textContent("#ciphertext")).toMatch(/^[A-Za-z0-9+/]{40,}={0,2}$/);
    await page.click("#decrypt button");
    await expect.poll(() => page.textContent("#decrypted")).toBe("version 1: hello from the console");
    expect(await page.$$eval("#keys tbody tr", (rows) => rows.map((r) => r.querySelector("td")?.textContent))).toEqual(["console-key"]);
    const shot = join(ARTIFACTS, "console-key-and-versions.png");
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`browser: console shows key console-key with versions 1 and 2 ENABLED, decrypted its ciphertext; screenshot ${shot}`);
    await page.close();
  });

  it("creates a node pool and watches its task until it succeeds", async () => {
    const page = await signedIn(server.token);
    await page.waitForSelector("#app", { state: "visible" });
    await page.fill("#service-instance", SI);
    await page.fill("#cluster", CL);
    await page.fill("#pool-name", "console-pool");
    await page.fill("#flavor", "cpu.4C.16G");
    await page.fill("#count", "2");
    await page.click("#pool-create button");
    // Watched while it runs, then done.
    await expect.poll(() => page.textContent("#watch"), { timeout: 15_000 }).toMatch(/^task \S+ CreateNodePool: (PENDING|RUNNING) \.\.\.$/);
    await expect.poll(() => page.textContent("#watch"), { timeout: 15_000 }).toMatch(/^task \S+ CreateNodePool: SUCCEEDED$/);
    // The console reloads its tables once the watch shows the end, so they are read until they show it too.
    const pools = () => page.$$eval("#pools tbody tr", (rows) => rows.map((r) => [...r.querySelectorAll("td")].map((td) => td.textContent)));
    await expect.poll(pools, { timeout: 5_000 }).toEqual([["console-pool", expect.any(String), "cpu.4C.16G", "2", "RUNNING"]]);
    const tasks = () => page.$$eval("#tasks tbody tr", (rows) => rows.map((r) => [...r.querySelectorAll("td")].slice(1).map((td) => td.textContent)));
    await expect.poll(tasks, { timeout: 5_000 }).toEqual([["CreateNodePool", "SUCCEEDED", server.adminId, "pool console-pool: RUNNING"]]);
    const shot = join(ARTIFACTS, "console-pool-and-task.png");
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`browser: console shows pool console-pool RUNNING and its CreateNodePool task SUCCEEDED; screenshot ${shot}`);
    await page.close();
  });
});
