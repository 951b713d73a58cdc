import { PassThrough } from "node:stream";
import { createLogger } from "../../src/logger.js";

// A logger at info whose output the test reads back: every line written so far, parsed.
export function logLines(): { logger: ReturnType<typeof createLogger>; lines: () => Record<string, unknown>[] } {
  const sink = new PassThrough();
  const chunks: string[] = [];
  sink.on("data", (chunk: Buffer) => chunks.push(chunk.toString()));
  return {
    logger: createLogger("info", sink),
    lines: () =>
      chunks
        .join("")
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
