import { chmodSync, closeSync, openSync, statSync } from "node:fs";

// The files of the data directory hold key material (wrapped or not), so they are readable by the server's user
// only, whatever the umask and the mode of the directory: an operator may well hand us a directory that is 0777.

// Takes every group and other permission off `path`, if it exists and has any.
export function restrictToOwner(path: string): void {
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  if ((mode & 0o077) !== 0) chmodSync(path, 0o600);
}

// Creates `path` empty with mode 0600 unless it exists; an existing one is restricted to its owner. Opening with
// O_EXCL means an existing file is never opened here: closing a descriptor of a SQLite file that this process
// also holds open elsewhere would drop that connection's POSIX locks.
export function createPrivateFile(path: string): void {
  try {
    closeSync(openSync(path, "wx", 0o600));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    restrictToOwner(path);
  }
}
