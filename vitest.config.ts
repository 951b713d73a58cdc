import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores here: a fork per file keeps servers and SQLite handles of one file away from another.
    pool: "forks",
    // Three files at a time. Vitest's default on two cores is one (cores - 1), and most files wait on sockets, timers
    // and child processes more than they compute: the suite took 530 s with one worker and 355 s with two, with
    // the same results (2026-11-27); on a slower machine 520 s with two and 450-530 s with three, the same results
    // again, to keep .ci/run under its 15 minutes there (about 15 with two, 2026-11-28). The hostile tests, which
    // measure stalls, run one file at a time all the same (--no-file-parallelism in package.json).
    maxWorkers: 3,
  },
});
