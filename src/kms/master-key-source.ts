import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Logger } from "pino";
import { restrictToOwner } from "../shared/private-file.js";
import { MasterKey } from "./master-key.js";

function decode(text: string, origin: string): Uint8Array {
  const bytes = Buffer.from(text.trim(), "base64");
  if (bytes.length !== 32) throw new Error(`the master key from ${origin} must be base64 of exactly 32 bytes`);
  return bytes;
}

// The master key comes from the environment, a file the operator names, or, on the embedded default's first
// start, a new random file in the data directory readable by the server's user only.
export function loadMasterKey(opts: { masterKey: string; masterKeyFile: string; dataDir: string }, logger: Logger): MasterKey {
  if (opts.masterKey !== "") return new MasterKey(decode(opts.masterKey, "MASTER_KEY"));
  if (opts.masterKeyFile !== "") {
    const raw = readFileSync(opts.masterKeyFile);
    return new MasterKey(raw.length === 32 ? raw : decode(raw.toString("utf8"), opts.masterKeyFile));
  }
  const path = join(opts.dataDir, "master.key");
  if (!existsSync(path)) {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    writeFileSync(path, randomBytes(32).toString("base64") + "\n", { mode: 0o600, flag: "wx" });
    logger.warn({ path }, "created a new master key; back it up: without it no stored key can be used");
  } else {
    restrictToOwner(path);
  }
  return new MasterKey(decode(readFileSync(path, "utf8"), path));
}
