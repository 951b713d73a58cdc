import { readFileSync, rmSync, writeFileSync } from "node:fs";

// One bench at a time: a second one would rebuild .bench/build under the first and compete for the same CPUs,
// and both would measure nonsense. The lock file holds the pid of the bench that owns it.
export function takeLock(path: string): () => void {
  let holder: number | null = null;
  try {
    holder = Number(readFileSync(path, "utf8").trim());
  } catch {
    holder = null;
  }
  if (holder !== null && Number.isInteger(holder) && holder !== process.pid && alive(holder)) {
    throw new Error(`another bench is running (pid ${holder}); wait for it, or remove ${path} if that is wrong`);
  }
  writeFileSync(path, `${process.pid}\n`);
  return () => {
    try {
      if (Number(readFileSync(path, "utf8").trim()) === process.pid) rmSync(path, { force: true });
    } catch {
      // already gone
    }
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("bench/run");
  } catch {
    return false;
  }
}
