import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { build } from "esbuild";
import { tempDir } from "../support/temp-dir.js";

// A plain web server of another origin than the API server's, serving one page whose script is `entryPoint`
// bundled by esbuild, as a web application elsewhere would be served.
export async function servePage(entryPoint: string, title: string): Promise<{ port: number; close(): Promise<void> }> {
  const dir = tempDir();
  await build({ entryPoints: [entryPoint], outfile: join(dir.path, "page.js"), bundle: true, format: "esm", target: "es2022", logLevel: "warning" });
  const script = readFileSync(join(dir.path, "page.js"));
  dir.remove();
  const pages = createServer((req, res) => {
    if (req.url === "/page.js") res.writeHead(200, { "content-type": "text/javascript" }).end(script);
    else res.writeHead(200, { "content-type": "text/html" }).end(`<!doctype html><title>${title}</title><script type="module" src="/page.js"></script>`);
  });
  await new Promise<void>((resolve) => pages.listen(0, "127.0.0.1", resolve));
  return {
    port: (pages.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => pages.close(() => resolve())),
  };
}
