import { randomBytes } from "node:crypto";
import { KeyManagerService } from "../gen/kms/v1/kms_pb.js";
import { resultToRestJson } from "../src/transport/rest/json-any.js";
import { buildRequestMessage } from "../src/transport/rest/request-builder.js";
import { RouteTable } from "../src/transport/rest/route-table.js";
import { methodTableOf } from "../test/support/method-table.js";

// `npm run bench:rest-codec`: what the REST surface's own JSON work costs for a 1 KiB Encrypt, alone in one process,
// with no HTTP and no pipeline: the request message built from the body as the handler builds it, the answer written
// as the JSON object it sends. Beside it, the floor: JSON.parse, base64 both ways and an object of the same answer,
// which any JSON endpoint does (bench/baseline-http1.ts). The gap between the two is the transcoder's overhead per
// call, read in nanoseconds without the ±10% of the h2load rows (bench/README.md).

const CALLS = 200_000;
const ROUNDS = 5;

const table = new RouteTable(methodTableOf([KeyManagerService]));
const found = table.lookup("POST", "/v1/encrypt");
if (found.kind !== "found") throw new Error("no REST route for POST /v1/encrypt");
const { route, pathValues } = found;
const body = Buffer.from(JSON.stringify({ keyId: "bench-key-0001", plaintext: randomBytes(1024).toString("base64"), additionalAuthenticatedData: randomBytes(32).toString("base64") }));
const ciphertext = new Uint8Array(randomBytes(1024 + 40));
// What the Encrypt handler returns: the init object of an EncryptResponse.
const response = { keyId: "bench-key-0001", keyVersionId: 1, ciphertext };

function transcoded(): number {
  const message = buildRequestMessage({ route, pathValues, query: null, body, contentType: "application/json", contentEncoding: undefined, origin: undefined }) as unknown as { plaintext: Uint8Array };
  const json = resultToRestJson(route.method.output, response) as { ciphertext: string };
  return message.plaintext.length + json.ciphertext.length;
}

function floor(): number {
  const json = JSON.parse(body.toString("utf8")) as { keyId: string; plaintext: string; additionalAuthenticatedData: string };
  const plaintext = Buffer.from(json.plaintext, "base64");
  const aad = Buffer.from(json.additionalAuthenticatedData, "base64");
  const answer = { keyId: json.keyId, keyVersionId: 1, ciphertext: Buffer.from(ciphertext.buffer, ciphertext.byteOffset, ciphertext.length).toString("base64") };
  return plaintext.length + aad.length + answer.ciphertext.length;
}

// Nanoseconds per call of each round, after a round of warm-up.
function measure(work: () => number): number[] {
  let sink = 0;
  for (let i = 0; i < CALLS; i++) sink += work();
  const rounds: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < CALLS; i++) sink += work();
    rounds.push(Number(process.hrtime.bigint() - started) / CALLS);
  }
  if (sink === 0) throw new Error("nothing was transcoded");
  return rounds;
}

for (const [name, work] of [["REST transcoding", transcoded], ["floor (JSON.parse, base64)", floor]] as const) {
  const rounds = measure(work).sort((a, b) => a - b);
  console.log(`${name.padEnd(28)} median ${rounds[Math.floor(ROUNDS / 2)]!.toFixed(0)} ns/call (rounds ${rounds.map((r) => r.toFixed(0)).join(", ")})`);
}
