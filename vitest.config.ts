import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores here: a fork per file keeps servers and SQLite handles of one file away from another.
    pool: "forks",
  },
});
