import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import { ConfigError } from "./config-error.js";

// The files that settings name (TLS_CERT_FILE, TLS_KEY_FILE, MASTER_KEY_FILE, CATALOG_FILE), opened as one: only a
// regular file (after symlinks), of at most `maxBytes`, else a ConfigError naming the setting. readFileSync read
// /dev/zero until RSS passed 3 GB and waited for ever on a FIFO no one wrote to (a probe of 82d22ee). O_NONBLOCK makes
// opening a FIFO return at once; fstat then judges what was opened, not what the path named a moment before.
// `label` is how messages name the setting, "--catalog (CATALOG_FILE)".

export function readSettingFile(label: string, path: string, maxBytes: number): Buffer {
  return withSettingFile(label, path, maxBytes, (fd) => {
    // One byte more than allowed tells a file that grew since fstat.
    const buffer = Buffer.alloc(maxBytes + 1);
    let length = 0;
    for (let n = -1; n !== 0 && length < buffer.length; length += n) n = readSync(fd, buffer, length, buffer.length - length, null);
    if (length > maxBytes) throw tooLarge(label, path, maxBytes);
    return buffer.subarray(0, length);
  });
}

// The same checks without reading: for a file that is read later, once the data directory is open.
export function checkSettingFile(label: string, path: string, maxBytes: number): void {
  withSettingFile(label, path, maxBytes, () => undefined);
}

function withSettingFile<T>(label: string, path: string, maxBytes: number, use: (fd: number) => T): T {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    throw new ConfigError(`${label} ${path} ${unreadable(err)}`);
  }
  try {
    const stat = fstatSync(fd);
    if (stat.isDirectory()) throw new ConfigError(`${label} ${path} is a directory`);
    if (!stat.isFile()) throw new ConfigError(`${label} ${path} is not a regular file (a device, FIFO or socket): name a file`);
    if (stat.size > maxBytes) throw tooLarge(label, path, maxBytes);
    return use(fd);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(`${label} ${path} ${unreadable(err)}`);
  } finally {
    closeSync(fd);
  }
}

function unreadable(err: unknown): string {
  const code = (err as { code?: string }).code;
  if (code === "ENOENT") return "does not exist";
  if (code === "EACCES") return "cannot be read by this user";
  if (code === "EISDIR") return "is a directory";
  return `cannot be read (${code ?? (err as Error).message})`;
}

function tooLarge(label: string, path: string, maxBytes: number): ConfigError {
  return new ConfigError(`${label} ${path} is larger than ${maxBytes} bytes, more than such a file holds`);
}
