import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import type { BrowserContext } from "playwright-core";
import { tempDir } from "../support/temp-dir.js";

// Debian's Chromium (apt-get install chromium; .ci/run installs it when missing), driven by playwright-core, with a
// fresh profile and nothing that reaches out to the network on its own.
export const CHROMIUM = "/usr/bin/chromium";
const FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

// Where the browser tests leave their screenshots (CI keeps the directory as the run's artifacts).
export const ARTIFACTS = join("test-artifacts", "browser");

export async function launchChromium(): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const profile = tempDir();
  // launchPersistentContext passes --user-data-dir=<profile> and --headless itself.
  const context = await chromium.launchPersistentContext(profile.path, { executablePath: CHROMIUM, headless: true, args: FLAGS, timeout: 30_000 });
  return {
    context,
    async close() {
      await context.close();
      profile.remove();
    },
  };
}
