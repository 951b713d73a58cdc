import { pino } from "pino";
import type { Logger } from "pino";

// Structured JSON logs on stdout. Nothing logs request or response messages, so key material, plaintext and
// credentials cannot reach the log; the redaction below guards the headers that a future log line might carry.
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { service: "cloudplane" },
      redact: { paths: ["*.authorization", "*.x-api-key", "*.headers.authorization", "*.headers.x-api-key"], censor: "[redacted]" },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination ?? process.stdout,
  );
}
