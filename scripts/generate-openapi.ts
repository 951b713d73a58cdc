// Writes openapi/openapi.json, the OpenAPI 3.1 document of the REST surface, from proto/ (`npm run generate` runs
// it after buf generate; .ci/check-generated fails when the committed file is stale). The descriptors come from
// `buf build`, which keeps the comments that become the descriptions.
//   node --import tsx scripts/generate-openapi.ts [--out FILE]
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { apiServices } from "../src/routes.js";
import { openApiDocument } from "./openapi/openapi-document.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({ options: { out: { type: "string", default: join(root, "openapi", "openapi.json") } } });

const dir = mkdtempSync(join(os.tmpdir(), "cloudplane-openapi-"));
try {
  const image = join(dir, "image.binpb");
  execFileSync(join(root, "node_modules", ".bin", "buf"), ["build", "-o", image], { cwd: root, stdio: "inherit" });
  const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(image)));
  const services = apiServices.map((s) => {
    const found = registry.getService(s.typeName);
    if (found === undefined) throw new Error(`buf build has no service ${s.typeName}`);
    return found;
  });
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string; description: string };
  const document = openApiDocument(services, { title: "cloudplane REST/JSON API", version: pkg.version, description: pkg.description });
  mkdirSync(dirname(values.out!), { recursive: true });
  writeFileSync(values.out!, `${JSON.stringify(document, null, 2)}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
