import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import type { MasterKeyStore } from "../storage/kms-store.js";
import type { MasterKeyReader } from "../storage/storage.js";
import { createFileAtomically, removeDurably, renameDurably } from "../shared/durable-file.js";
import { restrictToOwner } from "../shared/private-file.js";
import { readSettingFile } from "../shared/setting-file.js";
import { MasterKeyMismatchError, isRefusal, judgeMasterKey, masterKeyCheck, mismatchMessage, requireMatchingMasterKey } from "./master-key-check.js";
import { MasterKey } from "./master-key.js";

// Where the master key comes from, and the start-up rules that keep it bound to the data (docs/master-key-check.md):
// the environment, a file the operator names, or the data directory's own `master.key`, which is generated only
// for a store that never held a key, and which `npm run rewrap-master-key` replaces through `master.key.new`.

export interface MasterKeySettings {
  masterKey: string;
  masterKeyFile: string;
  dataDir: string;
  // Set when the store is PostgreSQL (for messages).
  databaseUrl?: string;
}

// The log lines of these rules; the server passes its logger, the re-wrap command prints them.
export interface MasterKeyNotices {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface ResolvedMasterKey {
  key: MasterKey;
  // Where it was read from, for messages: "MASTER_KEY" or a file path.
  origin: string;
  // The data directory's own key file when the key is read from it, else null (MASTER_KEY or MASTER_KEY_FILE).
  ownFile: string | null;
}

// A file the operator names or the server wrote: refused at start, never generated over.
export class MasterKeyMissingError extends Error {}

export const masterKeyPath = (dataDir: string): string => join(dataDir, "master.key");
// The new key of a re-wrap, before it replaces master.key.
export const stagedMasterKeyPath = (dataDir: string): string => join(dataDir, "master.key.new");

export function decodeMasterKey(text: string, origin: string): Uint8Array {
  const bytes = Buffer.from(text.trim(), "base64");
  if (bytes.length !== 32) throw new Error(`the master key from ${origin} must be base64 of exactly 32 bytes`);
  return bytes;
}

// A key file holds 32 bytes, raw or in base64 with white space around: far less than this.
export const MASTER_KEY_FILE_MAX_BYTES = 1024;

// The 32 bytes of a key file: raw, or base64 with or without a line end. `label` names where the path came from in
// a refusal (a regular file of at most MASTER_KEY_FILE_MAX_BYTES, src/shared/setting-file.ts).
export function readMasterKeyMaterial(path: string, label = "master key file"): Uint8Array {
  const raw = readSettingFile(label, path, MASTER_KEY_FILE_MAX_BYTES);
  return raw.length === 32 ? raw : decodeMasterKey(raw.toString("utf8"), path);
}

// The form in which key files are written.
export const masterKeyFileText = (material: Uint8Array): string => Buffer.from(material).toString("base64") + "\n";

// The master key as configured, with the data directory's own file settled first. Does not check it against the
// store: loadMasterKey and the re-wrap command do.
export async function resolveMasterKey(opts: MasterKeySettings, store: MasterKeyStore, notices: MasterKeyNotices): Promise<ResolvedMasterKey> {
  const named = namedMasterKey(opts);
  if (named !== null) return named;
  const path = masterKeyPath(opts.dataDir);
  await settleStagedKey(opts.dataDir, store, notices);
  if (!existsSync(path)) {
    const recorded = await store.readMasterKeyCheck();
    if (recorded !== null || (await store.holdsKeys())) {
      const id = recorded === null ? "" : ` (key id ${recorded.keyId})`;
      throw new MasterKeyMissingError(
        `the master key file ${path} is missing, but the data directory ${opts.dataDir} holds keys wrapped under a ` +
          `master key${id}; no new one was generated, since it could not unwrap them. Restore master.key from your ` +
          `backup, or configure the original key with MASTER_KEY_FILE or MASTER_KEY`,
      );
    }
    mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
    const material = randomBytes(32);
    // Never over a key another process has just generated (two first starts at once): that one fails with EEXIST.
    createFileAtomically(path, masterKeyFileText(material));
    material.fill(0);
    notices.warn({ path }, "created a new master key; back it up: without it no stored key can be used");
  } else {
    restrictToOwner(path);
  }
  return { key: new MasterKey(readMasterKeyMaterial(path)), origin: path, ownFile: path };
}

// The key MASTER_KEY or MASTER_KEY_FILE gives, if either is set.
function namedMasterKey(opts: MasterKeySettings): ResolvedMasterKey | null {
  if (opts.masterKey !== "") return { key: new MasterKey(decodeMasterKey(opts.masterKey, "MASTER_KEY")), origin: "MASTER_KEY", ownFile: null };
  if (opts.masterKeyFile !== "") {
    return { key: new MasterKey(readMasterKeyMaterial(opts.masterKeyFile, "--master-key-file (MASTER_KEY_FILE)")), origin: opts.masterKeyFile, ownFile: null };
  }
  return null;
}

// Before the store is upgraded (src/storage/schema-version.ts): a key the store's check value or one of its
// materials proves wrong is refused while nothing has been changed, so that the refusal's "nothing was changed"
// holds for a store an older build wrote too (a probe found every pending migration applied before it, 2026-11-28).
// Only a key that can be read without settling anything is judged here; the data directory's own file next to a
// staged master.key.new (an interrupted re-wrap), or missing, is left to loadMasterKey, after the upgrade.
export async function refuseOtherMasterKey(opts: MasterKeySettings, reader: MasterKeyReader): Promise<void> {
  const own = masterKeyPath(opts.dataDir);
  const configured =
    namedMasterKey(opts) ??
    (existsSync(own) && !existsSync(stagedMasterKeyPath(opts.dataDir)) ? { key: new MasterKey(readMasterKeyMaterial(own)), origin: own } : null);
  if (configured === null) return;
  const verdict = await judgeMasterKey(configured.key, reader);
  if (isRefusal(verdict)) {
    throw new MasterKeyMismatchError(mismatchMessage({ origin: configured.origin, dataDir: opts.dataDir, database: (opts.databaseUrl ?? "") !== "" }, configured.key, verdict));
  }
}

// A re-wrap interrupted between staging master.key.new and renaming it over master.key leaves both files. The check
// value stored with the data tells which key the data is under: that one stays as master.key, the other goes. If
// neither fits, both are left for the operator and the check that follows refuses to start.
async function settleStagedKey(dataDir: string, store: MasterKeyStore, notices: MasterKeyNotices): Promise<void> {
  const path = masterKeyPath(dataDir);
  const staged = stagedMasterKeyPath(dataDir);
  // A staged key whose write never finished: it never wrapped anything.
  if (existsSync(`${staged}.tmp`)) removeDurably(`${staged}.tmp`);
  if (!existsSync(staged)) return;
  restrictToOwner(staged);
  const fits = async (file: string): Promise<boolean> => {
    try {
      return !isRefusal(await judgeMasterKey(new MasterKey(readMasterKeyMaterial(file)), store));
    } catch {
      return false;
    }
  };
  if (existsSync(path) && (await fits(path))) {
    removeDurably(staged);
    notices.warn({ path, discarded: staged }, "an interrupted master key re-wrap had not committed: the data is still under master.key; discarded master.key.new");
  } else if (await fits(staged)) {
    renameDurably(staged, path);
    const keyId = masterKeyCheck(new MasterKey(readMasterKeyMaterial(path))).keyId;
    notices.warn({ path, keyId }, "finished an interrupted master key re-wrap: the data is under master.key.new, which now replaces master.key");
  }
}

// The master key the server runs with: resolved as above, then checked against the data directory (start-up
// refuses a key the data was not written with, before anything listens).
export async function loadMasterKey(opts: MasterKeySettings, store: MasterKeyStore, notices: MasterKeyNotices): Promise<MasterKey> {
  const resolved = await resolveMasterKey(opts, store, notices);
  const verdict = await requireMatchingMasterKey(resolved.key, store, { origin: resolved.origin, dataDir: opts.dataDir, database: (opts.databaseUrl ?? "") !== "" }, Date.now());
  if (verdict.kind === "unwraps") {
    notices.info(
      { keyId: masterKeyCheck(resolved.key).keyId },
      "recorded the master key's check value: this data directory now refuses to start with any other master key",
    );
  }
  return resolved.key;
}
