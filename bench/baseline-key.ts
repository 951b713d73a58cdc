import { randomBytes } from "node:crypto";
import { versionKey } from "../src/kms/ciphertext.js";
import type { VersionKey } from "../src/kms/ciphertext.js";

// The one key every baseline holds, in the shape cloudplane's KeyCache keeps it: a VersionKey built once, looked
// up in a Map by id on every call. The id comes from the bench (it is the id
// cloudplane assigned, so every server accepts the same request files); the material is random per process.
export interface BaselineKey {
  readonly id: string;
  readonly versionId: number;
  readonly key: VersionKey;
}

export const BASELINE_VERSION_ID = 1;

export function baselineKeys(env: NodeJS.ProcessEnv): Map<string, BaselineKey> {
  const id = env.BENCH_KEY_ID;
  if (id === undefined || id === "") throw new Error("BENCH_KEY_ID is required");
  const key: BaselineKey = {
    id,
    versionId: BASELINE_VERSION_ID,
    key: versionKey("AES_256", randomBytes(32), id, BASELINE_VERSION_ID),
  };
  return new Map([[id, key]]);
}

// The port the bench asked for; 0 lets the system choose. The chosen one is printed as `{"listening":port}`.
export function baselinePort(env: NodeJS.ProcessEnv): number {
  const port = Number(env.PORT ?? "0");
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`bad PORT ${env.PORT}`);
  return port;
}
