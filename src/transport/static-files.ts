import { readFileSync } from "node:fs";
import type { NodeRequest, NodeResponse } from "./node-types.js";

// A file the server answers GET with as it is: the OpenAPI document, the console's page and bundle.
export interface StaticFile {
  urlPath: string;
  file: string;
  contentType: string;
}

// Reads every file once at start (a missing one stops the server: it was built without it), and answers GET and
// HEAD of their paths with no credentials: they hold no data, only what the repository publishes. Returns false
// for any other request.
export function createStaticFiles(files: readonly StaticFile[]): (req: NodeRequest, res: NodeResponse, path: string) => boolean {
  const byPath = new Map(
    files.map((f) => {
      const body = readFileSync(f.file);
      return [f.urlPath, { body, headers: { "content-type": f.contentType, "content-length": String(body.length), "cache-control": "no-cache" } }] as const;
    }),
  );
  return (req, res, path) => {
    const found = byPath.get(path);
    if (found === undefined || (req.method !== "GET" && req.method !== "HEAD")) return false;
    res.writeHead(200, found.headers);
    if (req.method === "HEAD") res.end();
    else res.end(found.body);
    return true;
  };
}
