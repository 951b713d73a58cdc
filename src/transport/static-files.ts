import { requestIdOf } from "../pipeline/call.js";
import { existsSync, readFileSync } from "node:fs";
import type { NodeRequest, NodeResponse } from "./node-types.js";

// A file the server answers GET with as it is: the OpenAPI document, the console's page and bundle.
export interface StaticFile {
  // Every path it answers (the console's page is /console and /console/).
  urlPaths: string[];
  file: string;
  contentType: string;
  // Built by `npm run build` rather than committed: when missing, its paths are not served and `missing` is told.
  optional?: boolean;
}

// Reads every file once at start (a missing one that is not optional stops the server: it was shipped without it),
// and answers GET and HEAD of their paths with no credentials: they hold no data, only what the project publishes.
// Returns false for any other request.
export function createStaticFiles(files: readonly StaticFile[], missing: (file: string) => void): (req: NodeRequest, res: NodeResponse, path: string) => boolean {
  const byPath = new Map<string, { body: Buffer; headers: Record<string, string> }>();
  for (const f of files) {
    if (f.optional === true && !existsSync(f.file)) {
      missing(f.file);
      continue;
    }
    const body = readFileSync(f.file);
    const headers = { "content-type": f.contentType, "content-length": String(body.length), "cache-control": "no-cache", "x-content-type-options": "nosniff" };
    for (const path of f.urlPaths) byPath.set(path, { body, headers });
  }
  return (req, res, path) => {
    const found = byPath.get(path);
    if (found === undefined || (req.method !== "GET" && req.method !== "HEAD")) return false;
    // Every response carries a request id (docs/errors.md), these too, which no call pipeline answers.
    res.writeHead(200, { ...found.headers, "x-request-id": requestIdOf(req.headers["x-request-id"]?.toString()) });
    if (req.method === "HEAD") res.end();
    else res.end(found.body);
    return true;
  };
}
