import { loadConfig } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { build } from "../../src/server.js";

// Run as its own process (startup-loading.test.ts), since a test process has long loaded everything: builds a
// server on the data directory given, as main.ts does, without listening, and prints which of Node's lazily
// loaded modules named on the command line were loaded before and after.
const [dataDir, ...watched] = process.argv.slice(2);
// Node's list of the internal modules it has loaded (not in its typings).
const moduleLoadList = (): string[] => (process as unknown as { moduleLoadList: string[] }).moduleLoadList;
const loaded = (): string[] => watched.filter((name) => moduleLoadList().includes(`NativeModule ${name}`));
const before = loaded();
const config = loadConfig([], { DATA_DIR: dataDir ?? "", MASTER_KEY: Buffer.alloc(32, 7).toString("base64"), PORT: "0", HOST: "127.0.0.1" });
if (config === "help") throw new Error("unexpected --help");
// Errors only: a warning (the console not built yet, on a fresh checkout) would go to stdout before the answer.
const app = await build(config, createLogger("error"));
const after = loaded();
await app.close();
process.stdout.write(`${JSON.stringify({ before, after })}\n`);
