import { readFileSync } from "node:fs";

// Where a server's busy CPU went, from a V8 CPU profile (--cpu-prof): the self time of every function, summed by the
// area of the code it belongs to, as shares of the time the process was not idle. The cost rows compare two
// processes' req/s, which this host varies by more than the few percent in question; a profile splits one
// process's time, so a stage's own code can be read off directly. Self time only: the promises a stage adds and
// the garbage it leaves are counted under "node" and "gc", so a stage's share is a lower bound of its cost.

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

// First match wins: the stages before the pipeline core and identity code, whose files they share folders with.
const AREAS: readonly (readonly [area: string, pattern: RegExp])[] = [
  ["audit", /\/src\/(pipeline\/stages\/audit|identity\/audit-trail|storage\/audit-batch|storage\/\w+\/\w+-audit-store)\.js$/],
  ["metrics", /\/src\/(pipeline\/stages\/metrics\.js$|metrics\/)|\/node_modules\/prom-client\//],
  ["rate limits", /\/src\/(pipeline\/stages\/rate-limit\.js$|ratelimit\/)|\/node_modules\/rate-limiter-flexible\//],
  ["access", /\/src\/(pipeline\/stages\/(credentials|authentication|authorization)\.js$|identity\/)/],
  ["other stages", /\/src\/pipeline\/stages\//],
  ["pipeline", /\/src\/pipeline\//],
  ["transport", /\/src\/(transport\/|server\.js$|routes\.js$)/],
  ["kms", /\/src\/kms\//],
  ["protobuf-es", /\/node_modules\/@bufbuild\//],
  ["connect", /\/node_modules\/@connectrpc\//],
  ["node", /^node:/],
];

export const AREA_NAMES: readonly string[] = [...AREAS.map(([area]) => area), "gc", "other"];

function areaOf(frame: ProfileNode["callFrame"]): string | null {
  if (frame.functionName === "(idle)") return null;
  if (frame.functionName === "(garbage collector)") return "gc";
  for (const [area, pattern] of AREAS) if (pattern.test(frame.url)) return area;
  // Natives (writeBuffer, the crypto bindings' own frames ...), "(program)", other packages.
  return "other";
}

// The JavaScript side of node's AES-GCM (createCipheriv, update, final, getAuthTag, their Decipheriv twins), whose
// native work V8 counts in these frames' self time.
const CIPHER_URL = "node:internal/crypto/cipher";

export interface ProfileShares {
  busyS: number;
  // Shares (0-1) of the busy time by area.
  shares: Map<string, number>;
  // The busy time over the self time of the cipher frames; null when the process sealed and opened nothing. Every
  // Encrypt and Decrypt row's servers do the same AES-GCM work per call with the same code, so this is their CPU per
  // call in units of that work, a second reading of what a call costs beside req/s. It is not steadier: nine
  // processes of one build read 9.3-11.9 (bench/README.md), so it settles only differences larger than that.
  busyPerCipher: number | null;
}

export function profileShares(file: string): ProfileShares {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const timeOf = new Map<number, number>();
  profile.samples.forEach((id, i) => timeOf.set(id, (timeOf.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const byArea = new Map<string, number>(AREA_NAMES.map((a) => [a, 0]));
  let busy = 0;
  let cipher = 0;
  for (const node of profile.nodes) {
    const us = timeOf.get(node.id) ?? 0;
    const area = areaOf(node.callFrame);
    if (area === null || us === 0) continue;
    byArea.set(area, byArea.get(area)! + us);
    busy += us;
    if (node.callFrame.url === CIPHER_URL) cipher += us;
  }
  return {
    busyS: busy / 1e6,
    shares: new Map([...byArea].map(([a, us]) => [a, busy === 0 ? 0 : us / busy])),
    busyPerCipher: cipher === 0 ? null : busy / cipher,
  };
}
