import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import { KeyCache } from "../src/kms/key-cache.js";
import { newKeyId } from "../src/kms/key-manager.js";
import { MasterKey } from "../src/kms/master-key.js";
import type { KeyAggregate } from "../src/kms/model.js";

// `npm run bench:cache-entry`: the memory of one KeyCache entry (issue 14: at most 1 KiB per cached key version),
// measured alone: N keys of one version and N of two, built from stored rows as a cache miss builds them, each used
// once the way Encrypt uses it. Prints the heap, the native memory (external: the packed entries' typed arrays and
// material) and the RSS that each entry added, after full collections. RSS includes what V8 keeps around its live
// objects, so it is the figure to hold against the target; the heap is the entry itself.

const { values: flags } = parseArgs({ options: { keys: { type: "string", default: "100000" }, versions: { type: "string", default: "" } }, strict: true });
const N = Number(flags.keys);
// Each case in a process of its own: a heap that held the first case's entries would hold the second's in pages
// already counted in RSS.
if (flags.versions === "") {
  for (const versions of ["1", "2"]) {
    const run = spawnSync(process.execPath, [...process.execArgv, process.argv[1]!, "--keys", String(N), "--versions", versions], { stdio: "inherit" });
    if (run.status !== 0) process.exit(1);
  }
  process.exit(0);
}
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with node --expose-gc (npm run bench:cache-entry does)");

const master = new MasterKey(randomBytes(32));
const T = Date.now();

function aggregate(i: number, versions: number): KeyAggregate {
  // Rows read from storage bring new strings for every field, as here.
  const id = newKeyId(T + i);
  return {
    key: {
      id, parentId: `ns-${i % 10}`, name: `key-${i}`, description: "", owner: "admin", labels: [], rotationPeriodMs: null,
      nextRotationAt: null, defaultAlgorithm: "AES_256", primaryVersionId: versions, nextVersionId: versions + 1, createdAt: T + i, goneAt: null,
    },
    versions: Array.from({ length: versions }, (_, v) => ({
      keyId: id, id: v + 1, state: "ENABLED" as const, algorithm: "AES_256" as const, createdAt: T + i + v, destroyAt: null,
      wrappedMaterial: master.wrap(randomBytes(32), id, v + 1),
    })),
  };
}

function usage(): NodeJS.MemoryUsage {
  gc!();
  gc!();
  return process.memoryUsage();
}

{
  const versions = Number(flags.versions);
  const cache = new KeyCache(master, N);
  const before = usage();
  let firstId = "";
  for (let i = 0; i < N; i++) {
    const entry = cache.install(cache.build(aggregate(i, versions)));
    if (i === 0) firstId = entry.id;
    // Used as Encrypt uses it, from the cache: a view of its material.
    if (cache.get(entry.id)!.version(versions)!.key!.material.length !== 32) throw new Error("an AES-256 key without its 32 bytes");
  }
  const after = usage();
  // Read after measuring, so that the cache (and every entry) is still alive when measured.
  if (cache.get(firstId) === undefined) throw new Error(`the cache of ${N} keys lost its first one`);
  const per = (k: "heapUsed" | "external" | "rss") => ((after[k] - before[k]) / N).toFixed(0).padStart(5);
  process.stdout.write(
    `${N} keys of ${versions} version${versions === 1 ? " " : "s"}: heap ${per("heapUsed")} B, native ${per("external")} B, RSS ${per("rss")} B per key` +
      ` (RSS ${(after.rss / 2 ** 20).toFixed(0)} MiB)\n`,
  );
}
