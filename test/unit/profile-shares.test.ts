import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { AREA_NAMES, profileShares } from "../../bench/lib/profile-shares.js";
import { tempDir } from "../support/temp-dir.js";

const dir = tempDir("profile-shares-");
afterAll(() => dir.remove());
let files = 0;

// A profile of the shape `node --cpu-prof` writes: nodes with their call frames, the node of every sample and the
// microseconds before it.
function profileFile(frames: [functionName: string, url: string, us: number][]): string {
  const nodes = frames.map(([functionName, url], i) => ({ id: i + 1, callFrame: { functionName, url, scriptId: "0", lineNumber: 0, columnNumber: 0 } }));
  const samples = frames.map((_, i) => i + 1);
  const timeDeltas = frames.map(([, , us]) => us);
  const file = join(dir.path, `server-${files++}.cpuprofile`);
  writeFileSync(file, JSON.stringify({ nodes, startTime: 0, endTime: 0, samples, timeDeltas }));
  return file;
}

const BUILD = "file:///repo/.bench/build/src";

describe("profileShares", () => {
  it("splits the busy time by area, leaving idle time out", () => {
    const { busyS, shares } = profileShares(
      profileFile([
        ["(idle)", "", 500_000],
        ["succeeded", `${BUILD}/pipeline/stages/audit.js`, 40_000],
        ["append", `${BUILD}/storage/sqlite/sqlite-audit-store.js`, 20_000],
        ["encodeBatch", `${BUILD}/storage/audit-batch.js`, 10_000],
        ["record", `${BUILD}/metrics/call-tally.js`, 5_000],
        ["observe", "file:///repo/node_modules/prom-client/lib/histogram.js", 5_000],
        ["incrby", "file:///repo/node_modules/rate-limiter-flexible/lib/component/MemoryStorage/MemoryStorage.js", 30_000],
        ["tokenOf", `${BUILD}/pipeline/stages/credentials.js`, 10_000],
        ["check", `${BUILD}/identity/authenticator.js`, 10_000],
        ["deadline", `${BUILD}/pipeline/stages/deadline.js`, 20_000],
        ["compose", `${BUILD}/pipeline/stage.js`, 20_000],
        ["finish", `${BUILD}/transport/grpc/grpc-unary-adapter.js`, 50_000],
        ["sealInto", `${BUILD}/kms/ciphertext.js`, 60_000],
        ["toBinary", "file:///repo/node_modules/@bufbuild/protobuf/dist/esm/to-binary.js", 20_000],
        ["respond", "node:internal/http2/core", 400_000],
        ["(garbage collector)", "", 200_000],
        ["(program)", "", 100_000],
      ]),
    );
    expect(busyS).toBeCloseTo(1, 9);
    expect(Object.fromEntries(shares)).toEqual({
      audit: 0.07,
      metrics: 0.01,
      "rate limits": 0.03,
      access: 0.02,
      "other stages": 0.02,
      pipeline: 0.02,
      transport: 0.05,
      kms: 0.06,
      "protobuf-es": 0.02,
      connect: 0,
      node: 0.4,
      gc: 0.2,
      other: 0.1,
    });
    expect([...shares.keys()]).toEqual(AREA_NAMES);
  });

  it("adds up every sample of a node, and reads an empty profile as no time at all", () => {
    const file = join(dir.path, "repeated.cpuprofile");
    const nodes = [
      { id: 1, callFrame: { functionName: "sealInto", url: `${BUILD}/kms/ciphertext.js` } },
      { id: 2, callFrame: { functionName: "(idle)", url: "" } },
    ];
    writeFileSync(file, JSON.stringify({ nodes, samples: [1, 2, 1, 1], timeDeltas: [100, 5000, 200, 300] }));
    const repeated = profileShares(file);
    expect(repeated.busyS).toBeCloseTo(0.0006, 12);
    expect(repeated.shares.get("kms")).toBe(1);

    const empty = profileShares(profileFile([]));
    expect(empty.busyS).toBe(0);
    expect([...empty.shares.values()].every((share) => share === 0)).toBe(true);
    expect(empty.busyPerCipher).toBeNull();
  });

  it("reads the busy time per unit of the cipher's own time, from node's cipher frames only", () => {
    const { busyPerCipher } = profileShares(
      profileFile([
        ["(idle)", "", 700_000],
        ["update", "node:internal/crypto/cipher", 30_000],
        ["final", "node:internal/crypto/cipher", 20_000],
        // Crypto, but not the cipher: not counted as its work.
        ["randomFillSync", "node:internal/crypto/random", 50_000],
        ["sealInto", `${BUILD}/kms/ciphertext.js`, 100_000],
        ["respond", "node:internal/http2/core", 300_000],
      ]),
    );
    expect(busyPerCipher).toBeCloseTo(500_000 / 50_000, 9);
    // A process that sealed nothing (GetCryptoKey alone) has no such figure.
    expect(profileShares(profileFile([["respond", "node:internal/http2/core", 1000]])).busyPerCipher).toBeNull();
  });
});
