import { closeSync, fsyncSync, linkSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { dirname } from "node:path";

// File steps whose order matters after a crash: each is on disk before the function returns.

// Flushes a directory, so that a rename or unlink in it survives a power cut, not only a killed process.
export function syncDirectory(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function writeFlushed(path: string, content: string): void {
  const fd = openSync(path, "wx", 0o600);
  try {
    writeSync(fd, content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

// Writes `content` to `path` (mode 0600) so that, after a crash at any point, `path` either does not exist or holds
// all of it: written and flushed under `<path>.tmp`, then renamed into place, then the directory flushed. Replaces
// an existing `path`.
export function writeFileAtomically(path: string, content: string): void {
  const tmp = `${path}.tmp`;
  rmSync(tmp, { force: true });
  writeFlushed(tmp, content);
  renameSync(tmp, path);
  syncDirectory(dirname(path));
}

// Like writeFileAtomically, but fails with EEXIST if `path` exists, even when another process creates it meanwhile:
// the whole file is hard-linked into place, which never replaces anything. The temporary name is this process's own.
export function createFileAtomically(path: string, content: string): void {
  const tmp = `${path}.${process.pid}.tmp`;
  rmSync(tmp, { force: true });
  writeFlushed(tmp, content);
  try {
    linkSync(tmp, path);
  } finally {
    rmSync(tmp, { force: true });
  }
  syncDirectory(dirname(path));
}

// Renames `from` over `to` atomically and durably.
export function renameDurably(from: string, to: string): void {
  renameSync(from, to);
  syncDirectory(dirname(to));
}

// Removes `path` if it exists, durably.
export function removeDurably(path: string): void {
  rmSync(path, { force: true });
  syncDirectory(dirname(path));
}
