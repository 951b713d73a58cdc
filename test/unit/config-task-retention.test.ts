import { describe, expect, it } from "vitest";
import { ConfigError, helpText, loadConfig } from "../../src/config.js";

// TASK_RETENTION_SECONDS, read and checked as AUDIT_RETENTION_SECONDS is: whole seconds, 0 keeps tasks forever.

const DAY = 24 * 3600 * 1000;

function retentionMs(argv: string[], env: NodeJS.ProcessEnv): number {
  const config = loadConfig(argv, env);
  if (config === "help") throw new Error("unreachable");
  return config.taskRetentionMs;
}

describe("TASK_RETENTION_SECONDS", () => {
  it("is listed by --help, is 30 days by default, and is read from the environment or the flag, the flag first", () => {
    expect(helpText()).toMatch(/--task-retention-seconds\s+TASK_RETENTION_SECONDS\s+how long finished node pool and vApp tasks are kept.*\(default: 2592000\)/);
    expect(retentionMs([], {})).toBe(30 * DAY);
    expect(retentionMs([], { TASK_RETENTION_SECONDS: "0" })).toBe(0);
    expect(retentionMs(["--task-retention-seconds", "60"], { TASK_RETENTION_SECONDS: "0" })).toBe(60_000);
    expect(retentionMs([], { TASK_RETENTION_SECONDS: "3153600000" })).toBe(3153600000 * 1000);
  });

  it("refuses anything but a whole number of seconds from 0 to 100 years", () => {
    for (const bad of ["-1", "1.5", "30d", "3153600001"]) {
      expect(() => loadConfig([], { TASK_RETENTION_SECONDS: bad })).toThrow(ConfigError);
      expect(() => loadConfig([], { TASK_RETENTION_SECONDS: bad })).toThrow(
        `--task-retention-seconds (TASK_RETENTION_SECONDS) must be an integer from 0 to 3153600000, got "${bad}"`,
      );
    }
  });
});
