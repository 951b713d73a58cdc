import { execFile } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLUSTER, FLAVOR, VDC, writeTestCatalog } from "../e2e/compute-helpers.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";

// Issue 13: a gRPC client nobody here wrote. Debian's protoc and grpc_python_plugin generate Python stubs from
// proto/ into a temporary directory, and Debian's python3-grpcio runs the key management scenario and two node pool
// tasks (scenario.py) against the real server, decoding every error's google.rpc.Status from
// grpc-status-details-bin. .ci/run installs the packages when they are missing.

const run = promisify(execFile);
const PYTHON = "/usr/bin/python3";
const PROTOC = "/usr/bin/protoc";
const PLUGIN = "/usr/bin/grpc_python_plugin";
// Where Debian's libprotobuf-dev puts the well-known types (google/protobuf/*.proto) the protos import.
const WKT_INCLUDE = "/usr/include";

function protoFiles(dir: string, prefix = ""): string[] {
  return readdirSync(join(dir, prefix), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? protoFiles(dir, join(prefix, e.name)) : e.name.endsWith(".proto") ? [join(prefix, e.name)] : [],
  );
}

describe("Python gRPC client (Debian python3-grpcio, stubs by protoc from proto/)", () => {
  let server: TestServer;
  const dir = tempDir();
  const stubs = join(dir.path, "stubs");

  beforeAll(async () => {
    for (const tool of [PYTHON, PROTOC, PLUGIN, join(WKT_INCLUDE, "google/protobuf/timestamp.proto")]) {
      if (!existsSync(tool)) throw new Error(`${tool} is missing: .ci/run installs python3-grpcio, python3-protobuf, protobuf-compiler, protobuf-compiler-grpc and libprotobuf-dev`);
    }
    await run("mkdir", ["-p", stubs]);
    // Our protos, not gRPC's own (health, reflection), whose Python modules nobody needs here.
    const files = protoFiles("proto").filter((f) => !f.startsWith("grpc/"));
    await run(PROTOC, ["-I", "proto", "-I", WKT_INCLUDE, `--python_out=${stubs}`, `--grpc_python_out=${stubs}`, `--plugin=protoc-gen-grpc_python=${PLUGIN}`, ...files]);
    server = await startServer({ env: { CATALOG_FILE: writeTestCatalog(dir.path) } });
  });
  afterAll(async () => {
    await server?.stop();
    dir.remove();
  });

  it("runs the key management scenario and node pool tasks, decoding google.rpc.Status from grpc-status-details-bin", async () => {
    const { stdout, stderr } = await run(PYTHON, ["test/interop/python/scenario.py", `127.0.0.1:${server.port}`], {
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        PYTHONPATH: stubs,
        CLOUDPLANE_TOKEN: server.token,
        CLOUDPLANE_SERVICE_INSTANCE: VDC,
        CLOUDPLANE_CLUSTER: CLUSTER,
        CLOUDPLANE_FLAVOR: FLAVOR,
      },
      timeout: 60_000,
    });
    for (const line of stdout.trimEnd().split("\n")) console.log(`python: ${line}`);
    expect(stderr).toBe("");
    const lines = stdout.trimEnd().split("\n");
    const expected: (string | RegExp)[] = [
      /^created key python-[0-9a-f]+: primary version 1 ENABLED AES_256$/,
      "encrypted 17 bytes into 50, decrypted with version 1: hello from python",
      "versions: 1 DISABLED, 2 ENABLED; primary 2",
      "decrypt with disabled version 1: FAILED_PRECONDITION ErrorInfo(reason=CRYPTO_KEY_VERSION_NOT_ENABLED, domain=kms) PreconditionFailure(STATE)",
      "disable the primary: FAILED_PRECONDITION ErrorInfo(reason=CRYPTO_KEY_VERSION_IS_PRIMARY, domain=kms) PreconditionFailure(STATE)",
      "encrypt with version 0 and no plaintext: INVALID_ARGUMENT ErrorInfo(reason=REQUEST_INVALID, domain=kms) BadRequest(keyVersionId, plaintext)",
      "get an unknown key: NOT_FOUND ErrorInfo(reason=CRYPTO_KEY_NOT_FOUND, domain=kms) ResourceInfo(kms.v1.CryptoKey)",
      "no credentials: UNAUTHENTICATED ErrorInfo(reason=UNAUTHENTICATED, domain=kms)",
      "task CreateNodePool of 2 nodes: SUCCEEDED, pool named as asked RUNNING; DeleteNodePool: SUCCEEDED",
      "task CreateNodePool of 20 nodes: FAILED, error RESOURCE_EXHAUSTED ErrorInfo(reason=NODE_CAPACITY_EXHAUSTED, domain=compute) QuotaFailure(1 violation)",
    ];
    expect(lines.length).toBe(expected.length);
    expected.forEach((want, i) => (typeof want === "string" ? expect(lines[i]).toBe(want) : expect(lines[i]).toMatch(want)));
  });
});
