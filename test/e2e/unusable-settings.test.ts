import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startExpectingRefusal } from "../support/master-key-processes.js";
import { tempDir } from "../support/temp-dir.js";

// A value the server cannot use stops the start with exit 2 and a message naming the setting (README, "Settings and
// the master key"), before anything is written to the data directory. On 82d22ee these exited 1 with Node's raw
// error (ENOENT, EISDIR, EEXIST, getaddrinfo ENOTFOUND after the master key and admin account were written), read a
// device without end (MASTER_KEY_FILE=/dev/zero: 3 GB of RSS in 12 s) or waited for ever on a FIFO; HOST= listened on
// every address.

const dir = tempDir();
afterAll(() => dir.remove());

const fifo = join(dir.path, "fifo");
execFileSync("mkfifo", [fifo]);
const toZero = join(dir.path, "zero-link");
symlinkSync("/dev/zero", toZero);
const aFile = join(dir.path, "a-file");
writeFileSync(aFile, "not a directory\n");
const bigKey = join(dir.path, "big.key");
writeFileSync(bigKey, Buffer.alloc(2048, 0x41));
const catalog = join(dir.path, "catalog.json");
// A key of the wrong form: 31 bytes, in base64 and raw.
const shortKey = join(dir.path, "short.key");
writeFileSync(shortKey, Buffer.alloc(31, 7).toString("base64") + "\n");
const rawShortKey = join(dir.path, "raw-short.key");
writeFileSync(rawShortKey, Buffer.alloc(31, 7));

// [setting values, the first line of stderr]
const cases: [Record<string, string>, string][] = [
  [{ MASTER_KEY_FILE: "/dev/zero" }, "--master-key-file (MASTER_KEY_FILE) /dev/zero is not a regular file (a device, FIFO or socket): name a file"],
  [{ MASTER_KEY_FILE: toZero }, `--master-key-file (MASTER_KEY_FILE) ${toZero} is not a regular file (a device, FIFO or socket): name a file`],
  [{ MASTER_KEY_FILE: fifo }, `--master-key-file (MASTER_KEY_FILE) ${fifo} is not a regular file (a device, FIFO or socket): name a file`],
  [{ MASTER_KEY_FILE: bigKey }, `--master-key-file (MASTER_KEY_FILE) ${bigKey} is larger than 1024 bytes, more than such a file holds`],
  [{ MASTER_KEY_FILE: "/nonexistent" }, "--master-key-file (MASTER_KEY_FILE) /nonexistent does not exist"],
  [{ MASTER_KEY_FILE: "/etc" }, "--master-key-file (MASTER_KEY_FILE) /etc is a directory"],
  // These exited 1 once the store was open, leaving an empty database behind (a note of 2026-11-28).
  [{ MASTER_KEY: "notakey" }, "--master-key (MASTER_KEY) must be base64 of exactly 32 bytes"],
  [{ MASTER_KEY: Buffer.alloc(33, 1).toString("base64") }, "--master-key (MASTER_KEY) must be base64 of exactly 32 bytes"],
  [{ MASTER_KEY_FILE: shortKey }, `--master-key-file (MASTER_KEY_FILE) ${shortKey} must hold the 32 bytes of the master key, raw or in base64`],
  [{ MASTER_KEY_FILE: rawShortKey }, `--master-key-file (MASTER_KEY_FILE) ${rawShortKey} must hold the 32 bytes of the master key, raw or in base64`],
  [{ CATALOG_FILE: "/dev/zero" }, "--catalog (CATALOG_FILE) /dev/zero is not a regular file (a device, FIFO or socket): name a file"],
  [{ CATALOG_FILE: "/nonexistent" }, "--catalog (CATALOG_FILE) /nonexistent does not exist"],
  [{ TLS_CERT_FILE: "/dev/zero", TLS_KEY_FILE: aFile }, "--tls-cert-file (TLS_CERT_FILE) /dev/zero is not a regular file (a device, FIFO or socket): name a file"],
  [{ DATA_DIR: "" }, "--data-dir (DATA_DIR) must not be empty: name a directory (it is created if missing)"],
  [{ DATA_DIR: aFile }, `--data-dir (DATA_DIR) ${aFile} is not a directory`],
  [{ HOST: "" }, "--host (HOST) must not be empty: name the address to listen on (0.0.0.0 for every IPv4 address)"],
];

describe("a setting the server cannot use stops the start with exit 2, naming it, before the data directory is written", () => {
  it.each(cases)("%o", async (env, message) => {
    const dataDir = join(dir.path, `data-${readdirSync(dir.path).length}`);
    const refused = await startExpectingRefusal(dataDir, env);
    expect(refused.code).toBe(2);
    expect(refused.stderr.split("\n")[0]).toBe(message);
    expect(refused.stderr).toContain("Usage: cloudplane [flags]");
    expect(existsSync(dataDir)).toBe(false);
  }, 20_000);

  it("HOST that does not resolve is refused before the data directory is made", async () => {
    const dataDir = join(dir.path, "data-host");
    const refused = await startExpectingRefusal(dataDir, { HOST: "999.1.1.1" });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /^cloudplane failed to start: --host \(HOST\) 999\.1\.1\.1 is no address of this machine's resolver \((ENOTFOUND|EAI_AGAIN)\): give an IP address or a host name that resolves\n$/,
    );
    expect(existsSync(dataDir)).toBe(false);
  }, 20_000);

  // Found when the server listens, once its store is open; it was Node's raw EADDRINUSE, exit 1.
  it("a port in use exits 2 too, naming it", async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      const refused = await startExpectingRefusal(join(dir.path, "data-port"), { PORT: String(port), HOST: "127.0.0.1" });
      expect(refused.code).toBe(2);
      expect(refused.stderr).toBe(`cloudplane failed to start: --port (PORT) ${port} is in use on 127.0.0.1: stop what listens there, or choose another port\n`);
    } finally {
      taken.close();
    }
  }, 20_000);

  it("a catalog whose content is wrong exits 2 too", async () => {
    writeFileSync(catalog, "{ not json");
    const dataDir = join(dir.path, "data-catalog");
    mkdirSync(dataDir);
    const refused = await startExpectingRefusal(dataDir, { CATALOG_FILE: catalog });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(new RegExp(`^cloudplane failed to start: catalog: ${catalog.replace(/[.]/g, "\\.")} is not valid JSON`));
    // Read before the store is opened: no master key or database made by a start that could not go on.
    expect(readdirSync(dataDir)).toEqual([]);
  }, 20_000);
});
