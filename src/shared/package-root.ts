import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

// The package root (the directory of package.json), found by walking up from this file, so that files shipped
// with the project (openapi/, the console's bundle) are found whether this runs from src/ (tsx) or dist/src/.
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error("cannot find the package root (package.json) above " + fileURLToPath(import.meta.url));
    dir = parent;
  }
  return dir;
}
