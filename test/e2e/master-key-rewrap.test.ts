import { randomBytes } from "node:crypto";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { masterKeyCheck } from "../../src/kms/master-key-check.js";
import { MasterKey } from "../../src/kms/master-key.js";
import { openAll, ownKeyFiles, rewrapKilledAt, runRewrap, sealSome, startExpectingRefusal } from "../support/master-key-processes.js";
import { spawnServer } from "../support/server.js";
import { storeSnapshot } from "../support/store-snapshot.js";
import { tempDir } from "../support/temp-dir.js";

// `npm run rewrap-master-key` moves every stored material to a new master key (docs/master-key-check.md). Real
// processes throughout: the server as an operator starts it, the command, and SIGKILL at each of its steps, after
// which the server must start on its own with exactly one of the two keys and decrypt every ciphertext made before.

const ownLayout = { MASTER_KEY: "" };
const keyIdOf = (material: Buffer): string => masterKeyCheck(new MasterKey(material)).keyId;
const fileText = (material: Buffer): string => material.toString("base64") + "\n";
const plaintexts = (sealed: { plaintext: string }[]) => [...sealed, ...sealed].map((s) => s.plaintext);
// The rows of key management (a running server's compute worker keeps writing its heartbeat).
function kmsRows(dataDir: string) {
  const { kms_keys, kms_versions, kms_master_key } = storeSnapshot(dataDir);
  return { kms_keys, kms_versions, kms_master_key };
}

// Every file of a data directory that holds one of `needles`.
function filesHolding(dataDir: string, needles: Buffer[]): string[] {
  return readdirSync(dataDir).filter((name) => {
    const bytes = readFileSync(join(dataDir, name));
    return needles.some((needle) => bytes.includes(needle));
  });
}

// Rewrites every version row once at another size and back, through a connection without secure_delete, as servers
// wrote before it: SQLite moves such a cell and leaves the old one in the page's free space.
function moveEveryVersionRow(dataDir: string): void {
  const db = new Database(join(dataDir, "cloudplane.db"), { fileMustExist: true });
  try {
    db.exec("UPDATE kms_versions SET algorithm = algorithm || '-moved'; UPDATE kms_versions SET algorithm = replace(algorithm, '-moved', '')");
  } finally {
    db.close();
  }
}

describe("re-wrapping the data under a new master key", () => {
  const dir = tempDir();
  afterAll(() => dir.remove());

  // A new key in a file of the test directory, raw or base64 as an operator might write it.
  function newKeyFile(name: string, raw = false): { path: string; material: Buffer } {
    const material = randomBytes(32);
    const path = join(dir.path, name);
    writeFileSync(path, raw ? material : fileText(material), { mode: 0o600 });
    return { path, material };
  }

  // A store whose master key is named by MASTER_KEY_FILE (`current`), with data sealed under it, its server stopped;
  // and a new key file (`next`) to re-wrap it with.
  async function namedKeyStore(name: string) {
    const dataDir = join(dir.path, name);
    const current = newKeyFile(`${name}-current.key`);
    const next = newKeyFile(`${name}-new.key`);
    const server = await spawnServer({ dataDir, env: { MASTER_KEY: "", MASTER_KEY_FILE: current.path } });
    const sealed = await sealSome(server.url, 2);
    await server.kill("SIGTERM");
    return { dataDir, current, next, sealed };
  }

  it("with <data-dir>/master.key: refused while the server runs; then done, and the new key opens every ciphertext", async () => {
    const dataDir = join(dir.path, "own");
    let server = await spawnServer({ dataDir, env: ownLayout });
    const sealed = await sealSome(server.url, 4, "rest");
    const [oldText] = ownKeyFiles(dataDir);
    const next = newKeyFile("own-new.key", true);

    const before = kmsRows(dataDir);
    const busy = await runRewrap(dataDir, next.path);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toBe(`rewrap-master-key failed: ${join(dataDir, "cloudplane.db")} is in use (a server or another command has it open): stop it first\n`);
    expect(kmsRows(dataDir)).toEqual(before);
    expect(ownKeyFiles(dataDir)).toEqual([oldText, null]);
    await server.kill("SIGTERM");
    // What a server from before secure_delete left behind (docs/storage.md, "Erased material"): every row moved once,
    // its old cell, material under the old key, in the page's free space.
    const oldWrapping = (kmsRows(dataDir).kms_versions as { wrapped_material: Buffer }[]).map((v) => Buffer.from(v.wrapped_material));
    moveEveryVersionRow(dataDir);
    expect(filesHolding(dataDir, oldWrapping)).toContain("cloudplane.db");

    const done = await runRewrap(dataDir, next.path);
    expect(done.stderr).toBe("");
    expect(done.code).toBe(0);
    const oldId = keyIdOf(Buffer.from(oldText!, "base64"));
    const newId = keyIdOf(next.material);
    expect(done.stdout.trim().split("\n")).toEqual([
      `data directory: ${dataDir} (held exclusively until done)`,
      `current master key: ${join(dataDir, "master.key")} (key id ${oldId}), matches the data`,
      `new master key: ${next.path} (key id ${newId})`,
      `wrote the new key to ${join(dataDir, "master.key.new")}`,
      `re-wrapped 12 key material(s) under key id ${newId} and recorded its check value, in one transaction`,
      `replaced ${join(dataDir, "master.key")} with the new key (key id ${newId}); back it up, the old key no longer opens this data`,
      `done: 12 key material(s) moved from key id ${oldId} to key id ${newId}`,
      "erasing copies of the old wrapping from the database file (VACUUM)",
    ]);
    expect(ownKeyFiles(dataDir)).toEqual([fileText(next.material), null]);
    // A leaked old key opens nothing of this directory: 35 of 60 live materials were still there under it (a probe).
    expect(filesHolding(dataDir, oldWrapping)).toEqual([]);

    server = await spawnServer({ dataDir, env: ownLayout });
    try {
      expect(await openAll(server.url, sealed)).toEqual(plaintexts(sealed));
    } finally {
      await server.kill("SIGTERM");
    }
    const old = await startExpectingRefusal(dataDir, { MASTER_KEY: oldText!.trim() });
    expect(old.stderr).toContain(`(key id ${oldId}) does not match the one the data directory ${dataDir} was written with (key id ${newId},`);
  });

  it("with MASTER_KEY_FILE: re-wraps the data and leaves switching the setting to the operator", async () => {
    const { dataDir, current, next, sealed } = await namedKeyStore("named");

    const done = await runRewrap(dataDir, next.path, { MASTER_KEY_FILE: current.path });
    expect(done.code).toBe(0);
    expect(done.stdout).toContain(`start the server with it (MASTER_KEY_FILE=${next.path}, or its base64 in MASTER_KEY) instead of ${current.path}`);
    expect(ownKeyFiles(dataDir)).toEqual([null, null]);

    expect((await startExpectingRefusal(dataDir, { MASTER_KEY_FILE: current.path })).code).toBe(1);
    const server = await spawnServer({ dataDir, env: { MASTER_KEY: "", MASTER_KEY_FILE: next.path } });
    try {
      expect(await openAll(server.url, sealed)).toEqual(plaintexts(sealed));
    } finally {
      await server.kill("SIGTERM");
    }
  });

  // A probe on a full disk (2026-11-28): VACUUM failed after the commit and the command exited 1, "failed", though the
  // data was under the new key only; a script that then deleted the new key lost the data.
  it("whose erasure of old copies fails after the commit: exit 0, saying the re-wrap is done and to keep the new key", async () => {
    const { dataDir, current, next, sealed } = await namedKeyStore("vacuum");

    const done = await runRewrap(dataDir, next.path, { MASTER_KEY_FILE: current.path, CLOUDPLANE_TEST_REWRAP_FAIL_VACUUM: "1" });
    expect(done.code).toBe(0);
    expect(done.stderr).toBe(
      "rewrap-master-key: the re-wrap is done (the data is under the new master key only), but erasing the old wrapping's copies " +
        "from the file failed: database or disk is full (as a test asked). Keep the new key. Copies of the old wrapping may " +
        `remain in the file's free space until it is rebuilt: free space (about the database's size) and run VACUUM on ${join(dataDir, "cloudplane.db")} ` +
        "with the server stopped\n",
    );
    const server = await spawnServer({ dataDir, env: { MASTER_KEY: "", MASTER_KEY_FILE: next.path } });
    try {
      expect(await openAll(server.url, sealed)).toEqual(plaintexts(sealed));
    } finally {
      await server.kill("SIGTERM");
    }
  });

  it("killed with SIGKILL at any step: the server starts with exactly one of the two keys and every ciphertext decrypts", async () => {
    const dataDir = join(dir.path, "killed");
    let server = await spawnServer({ dataDir, env: ownLayout });
    const sealed = await sealSome(server.url, 6);
    await server.kill("SIGTERM");
    let current: Buffer = Buffer.from(ownKeyFiles(dataDir)[0]!, "base64");

    // Before the commit the data stays under the current key; from the commit on it is under the new one.
    const steps = [
      { step: "verified", committed: false },
      { step: "new-key-staged", committed: false },
      { step: "rewrapping", committed: false },
      { step: "committed", committed: true },
      { step: "key-replaced", committed: true },
    ];
    for (const { step, committed } of steps) {
      const next = newKeyFile(`killed-${step}.key`);
      const killed = await rewrapKilledAt(dataDir, next.path, step);
      expect(killed.stderr).toBe(`paused at ${step}\n`);
      const expected = committed ? next.material : current;
      const other = committed ? current : next.material;

      server = await spawnServer({ dataDir, env: ownLayout });
      try {
        expect(ownKeyFiles(dataDir), step).toEqual([fileText(expected), null]);
        expect(await openAll(server.url, sealed), step).toEqual(plaintexts(sealed));
      } finally {
        await server.kill("SIGTERM");
      }
      const refused = await startExpectingRefusal(dataDir, { MASTER_KEY: other.toString("base64") });
      expect(refused.stderr, step).toContain(`was written with (key id ${keyIdOf(expected)},`);
      current = expected;
    }
  }, 180_000);
});
