import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  CryptoKeySchema,
  CryptoKeyVersion_Algorithm,
  CryptoKeyVersion_State,
  EncryptRequestSchema,
  EncryptResponseSchema,
} from "../../gen/kms/v1/kms_pb.js";
import type { KmsClient } from "./grpc-client.js";
import type { LoadResult } from "./h2load.js";
import { post } from "./http-client.js";
import type { Reply } from "./http-client.js";
import { decryptBody, encryptBody, getCryptoKeyBody, grpcFrame, jsonEncryptBody, jsonEncryptRequest, textEncryptBody } from "./payloads.js";
import type { Body } from "./payloads.js";
import type { RunningServer, ServerName } from "./servers.js";
import { vcdInstantiate, vcdQuery } from "./vapp-scenarios.js";

// What the bench measures: one scenario is one request, posted by h2load to every server that serves it, with
// the targets of issue 8 on cloudplane's req/s. Each scenario also knows how to check a real answer end to end
// (h2load sees HTTP statuses and byte counts only) and writes the body h2load posts.

export type Protocol = "gRPC" | "gRPC-web" | "gRPC-web text" | "Connect" | "REST" | "VCD XML";

// A target on the req/s of cloudplane (and of a candidate) in one scenario, against another server of the same
// scenario measured in the same rounds.
export type Target =
  // req/s at least `atLeast` times those of `against`.
  | { kind: "ratio"; against: ServerName; atLeast: number }
  // `what`, 1 - req/s / req/s of `against` (the share of throughput something costs), at most `atMost`.
  | { kind: "cost"; against: ServerName; atMost: number; what: string };

// One server of a round, with its client and the key it answers to.
export interface Subject {
  name: ServerName;
  server: RunningServer;
  client: KmsClient;
  keyId: string;
  // Authorization of every request: the admin's token for cloudplane, a made-up one of the same length for the
  // baselines (which ignore it), so that every server reads the same bytes.
  authorization: string;
}

export interface PrepareContext {
  subject: Subject;
  bodiesDir: string;
  // Name of the body file: scenario and server.
  bodyName: string;
  // The same plaintexts for every server, by size, and the additional authenticated data of the REST request.
  plaintexts: Map<number, Buffer>;
  aad: Buffer;
}

export interface LoopContext {
  subject: Subject;
  durationS: number;
  warmupS: number;
}

export interface Scenario {
  id: string;
  protocol: Protocol;
  method: "Encrypt" | "Decrypt" | "GetCryptoKey" | "query vAppTemplate" | "instantiate to success";
  payload: string;
  // Every server it runs on; a candidate, when given, runs wherever cloudplane does. The others than cloudplane
  // (and candidate) are its references: each row shows its ratio to each of them.
  servers: ServerName[];
  targets: Target[];
  // h2c with --clients connections x --streams streams (the gRPC load), or HTTP/1.1 keep-alive connections
  // (--h1-connections, one request at a time on each: what browsers and most REST clients do).
  transport: "h2c" | "http1";
  path: string;
  // Request headers h2load sends.
  headers: string[];
  // Measured on processes started for this scenario alone, one right after the other, rather than within each
  // server's batch: for a comparison of two cloudplane variants close enough to need both in the same state (just
  // started) and measured at the same time.
  ownProcess?: boolean;
  // Measured by this loop of its own instead of h2load (a sequence of calls per round trip, which h2load cannot
  // make); its reqPerS is round trips per second.
  loop?: (ctx: LoopContext) => Promise<LoadResult>;
  // One real call checked in full, then the request body h2load posts. Runs again after the load: the server
  // must still answer correctly.
  prepare(ctx: PrepareContext): Promise<Body>;
}

const KMS = "/kms.v1.KeyManagerService";
const GRPC_HEADERS = ["content-type: application/grpc", "te: trailers"];
const CIPHERTEXT_OVERHEAD = 33;
const KIB = 1024;

// The issue's targets for gRPC Encrypt and Decrypt. At 64 KiB grpc-js's default 64 KiB windows and its copies
// weigh most, so more is asked against it, and a little less against the bare handler, whose windows are
// cloudplane's.
const GRPC_1K: Target[] = [
  { kind: "ratio", against: "grpc-js", atLeast: 1.2 },
  { kind: "ratio", against: "http2", atLeast: 0.85 },
];
const GRPC_64K: Target[] = [
  { kind: "ratio", against: "grpc-js", atLeast: 2 },
  { kind: "ratio", against: "http2", atLeast: 0.8 },
];

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

function payloadName(bytes: number): string {
  return `${bytes / KIB} KiB`;
}

// One full gRPC round trip through @grpc/grpc-js: what h2load cannot check (grpc-status in the trailers, the
// bytes themselves). Returns the ciphertext for the Decrypt load.
export async function roundTrip(s: Subject, plaintext: Uint8Array): Promise<Buffer> {
  const sealed = await s.client.encrypt(s.keyId, 1, plaintext);
  if (sealed.keyId !== s.keyId || sealed.keyVersionId !== 1 || sealed.ciphertext.length !== plaintext.length + CIPHERTEXT_OVERHEAD) {
    throw new Error(`${s.name}: Encrypt answered ${JSON.stringify({ keyId: sealed.keyId, version: sealed.keyVersionId, bytes: sealed.ciphertext.length })}`);
  }
  const opened = await s.client.decrypt(s.keyId, sealed.ciphertext);
  if (opened.keyVersionId !== 1 || !sameBytes(opened.plaintext, plaintext)) throw new Error(`${s.name}: Decrypt did not return the plaintext`);
  return sealed.ciphertext;
}

// An Encrypt answer that came some other way than gRPC: the right key, version and size, and, from a server that
// also speaks gRPC, a ciphertext that its gRPC Decrypt opens to the plaintext (the bare REST endpoint has no
// Decrypt; its seal is the same function as the others').
async function checkSealed(s: Subject, what: string, keyId: unknown, keyVersionId: unknown, ciphertext: Buffer, plaintext: Buffer, aad: Buffer | null): Promise<void> {
  if (keyId !== s.keyId || keyVersionId !== 1 || ciphertext.length !== plaintext.length + CIPHERTEXT_OVERHEAD) {
    throw new Error(`${s.name} ${what}: Encrypt answered ${JSON.stringify({ keyId, keyVersionId, bytes: ciphertext.length })}`);
  }
  if (s.name === "http1") return;
  const opened = await s.client.decrypt(s.keyId, ciphertext, aad ?? undefined);
  if (!sameBytes(opened.plaintext, plaintext)) throw new Error(`${s.name} ${what}: the ciphertext does not decrypt to the plaintext`);
}

async function checkJsonSealed(s: Subject, what: string, reply: Reply, plaintext: Buffer, aad: Buffer | null): Promise<void> {
  const text = reply.body.toString("utf8");
  if (reply.status !== 200) throw new Error(`${s.name} ${what}: HTTP ${reply.status}: ${text.slice(0, 500)}`);
  const answer = JSON.parse(text) as { keyId?: unknown; keyVersionId?: unknown; ciphertext?: unknown };
  if (typeof answer.ciphertext !== "string") throw new Error(`${s.name} ${what}: no ciphertext in ${text.slice(0, 500)}`);
  await checkSealed(s, what, answer.keyId, answer.keyVersionId, Buffer.from(answer.ciphertext, "base64"), plaintext, aad);
}

function grpc(id: string, method: "Encrypt" | "Decrypt", bytes: number, targets: Target[]): Scenario {
  return {
    id,
    protocol: "gRPC",
    method,
    payload: payloadName(bytes),
    servers: ["grpc-js", "http2", "cloudplane"],
    targets,
    transport: "h2c",
    path: `${KMS}/${method}`,
    headers: GRPC_HEADERS,
    async prepare({ subject: s, bodiesDir, bodyName, plaintexts }) {
      const plaintext = plaintexts.get(bytes)!;
      // The same plaintexts for every server; ciphertexts are each server's own (each holds its own key).
      const ciphertext = await roundTrip(s, plaintext);
      return method === "Encrypt" ? encryptBody(bodiesDir, bodyName, s.keyId, 1, plaintext) : decryptBody(bodiesDir, bodyName, s.keyId, ciphertext, bytes);
    },
  };
}

const getKey: Scenario = {
  id: "get-key",
  protocol: "gRPC",
  method: "GetCryptoKey",
  payload: "-",
  servers: ["grpc-js", "cloudplane"],
  targets: [{ kind: "ratio", against: "grpc-js", atLeast: 1.2 }],
  transport: "h2c",
  path: `${KMS}/GetCryptoKey`,
  headers: GRPC_HEADERS,
  async prepare({ subject: s, bodiesDir, bodyName }) {
    const bytes = await s.client.getCryptoKeyBytes(s.keyId);
    const key = fromBinary(CryptoKeySchema, bytes);
    const primary = key.primary;
    if (
      key.id !== s.keyId ||
      key.name !== "bench" ||
      key.createdAt === undefined ||
      primary?.id !== 1 ||
      primary.state !== CryptoKeyVersion_State.ENABLED ||
      primary.algorithm !== CryptoKeyVersion_Algorithm.AES_256
    ) {
      throw new Error(`${s.name}: GetCryptoKey answered ${JSON.stringify({ id: key.id, name: key.name, primary: primary?.id, state: primary?.state, algorithm: primary?.algorithm })}`);
    }
    return getCryptoKeyBody(bodiesDir, bodyName, s.keyId, bytes.length);
  },
};

const restEncrypt: Scenario = {
  id: "rest-encrypt-1k",
  protocol: "REST",
  method: "Encrypt",
  payload: payloadName(KIB),
  servers: ["http1", "cloudplane"],
  targets: [{ kind: "ratio", against: "http1", atLeast: 0.8 }],
  transport: "http1",
  path: "/v1/encrypt",
  headers: ["content-type: application/json"],
  async prepare({ subject: s, bodiesDir, bodyName, plaintexts, aad }) {
    const plaintext = plaintexts.get(KIB)!;
    const body = Buffer.from(JSON.stringify(jsonEncryptRequest(s.keyId, plaintext, aad)));
    const reply = await post({ port: s.server.port, path: "/v1/encrypt", headers: { "content-type": "application/json", authorization: s.authorization }, body, h1: true });
    await checkJsonSealed(s, "REST", reply, plaintext, aad);
    return jsonEncryptBody(bodiesDir, bodyName, s.keyId, plaintext, aad);
  },
};

// Connect's unary JSON, over h2c like the gRPC rows, so that it compares with gRPC Encrypt 1 KiB: same
// transport, another protocol.
const connectEncrypt: Scenario = {
  id: "connect-encrypt-1k",
  protocol: "Connect",
  method: "Encrypt",
  payload: payloadName(KIB),
  servers: ["cloudplane"],
  targets: [],
  transport: "h2c",
  path: `${KMS}/Encrypt`,
  headers: ["content-type: application/json", "connect-protocol-version: 1"],
  async prepare({ subject: s, bodiesDir, bodyName, plaintexts }) {
    const plaintext = plaintexts.get(KIB)!;
    const body = Buffer.from(JSON.stringify(jsonEncryptRequest(s.keyId, plaintext, null)));
    const headers = { "content-type": "application/json", "connect-protocol-version": "1", authorization: s.authorization };
    await checkJsonSealed(s, "Connect", await post({ port: s.server.port, path: `${KMS}/Encrypt`, headers, body, h1: false }), plaintext, null);
    return jsonEncryptBody(bodiesDir, bodyName, s.keyId, plaintext, null);
  },
};

// gRPC-web over h2c as well, binary or in the text form (base64 both ways). The answer is the message frame, then a
// trailers frame in the body.
function grpcWebEncrypt(text: boolean): Scenario {
  const contentType = text ? "application/grpc-web-text" : "application/grpc-web+proto";
  return {
    id: text ? "grpc-web-text-encrypt-1k" : "grpc-web-encrypt-1k",
    protocol: text ? "gRPC-web text" : "gRPC-web",
    method: "Encrypt",
    payload: payloadName(KIB),
    servers: ["cloudplane"],
    targets: [],
    transport: "h2c",
    path: `${KMS}/Encrypt`,
    headers: [`content-type: ${contentType}`, "x-grpc-web: 1"],
    async prepare({ subject: s, bodiesDir, bodyName, plaintexts }) {
      const plaintext = plaintexts.get(KIB)!;
      const frame = grpcFrame(toBinary(EncryptRequestSchema, create(EncryptRequestSchema, { keyId: s.keyId, keyVersionId: 1, plaintext })));
      const headers = { "content-type": contentType, "x-grpc-web": "1", authorization: s.authorization };
      const reply = await post({ port: s.server.port, path: `${KMS}/Encrypt`, headers, body: text ? Buffer.from(frame.toString("base64")) : frame, h1: false });
      const b = text ? base64Segments(reply.body) : reply.body;
      const length = b.length >= 5 ? b.readUInt32BE(1) : -1;
      const trailer = length < 0 ? Buffer.alloc(0) : b.subarray(5 + length);
      const typeOk = !text || reply.headers["content-type"] === "application/grpc-web-text+proto";
      if (reply.status !== 200 || !typeOk || b[0] !== 0 || length < 0 || b.length < 5 + length || trailer[0] !== 0x80 || !/^grpc-status:\s*0\r?$/m.test(trailer.subarray(5).toString("latin1"))) {
        throw new Error(`${s.name} ${contentType}: HTTP ${reply.status} ${reply.headers["content-type"]}, answer ${b.subarray(0, 200).toString("latin1")}`);
      }
      const answer = fromBinary(EncryptResponseSchema, b.subarray(5, 5 + length));
      await checkSealed(s, text ? "gRPC-web text" : "gRPC-web", answer.keyId, answer.keyVersionId, Buffer.from(answer.ciphertext), plaintext, null);
      return text ? textEncryptBody(bodiesDir, bodyName, s.keyId, 1, plaintext) : encryptBody(bodiesDir, bodyName, s.keyId, 1, plaintext);
    },
  };
}

// gRPC-web's text form: base64 in segments, each possibly padded, decoded four characters at a time.
function base64Segments(body: Buffer): Buffer {
  const text = body.toString("latin1");
  const groups: Buffer[] = [];
  for (let at = 0; at + 4 <= text.length; at += 4) groups.push(Buffer.from(text.slice(at, at + 4), "base64"));
  return Buffer.concat(groups);
}

// The same gRPC Encrypt 1 KiB load on cloudplane and on cloudplane started with PIPELINE_STAGES_OFF (servers.ts),
// to report what the call pipeline's stages cost. A difference of a few percent is the question, so both run on
// processes of their own, back to back.
const pipelineStages: Scenario = {
  ...grpc("pipeline-stages", "Encrypt", KIB, []),
  servers: ["no-stages", "cloudplane"],
  targets: [{ kind: "cost", against: "no-stages", atMost: 0.05, what: "pipeline stages cost" }],
  ownProcess: true,
};

// Issue 9's target: authentication and authorization together, against the same build with them switched off
// (ACCESS_STAGES_OFF: every other stage, the audit trail included, still runs).
const accessStages: Scenario = {
  ...grpc("access-stages", "Encrypt", KIB, []),
  servers: ["no-access", "cloudplane"],
  targets: [{ kind: "cost", against: "no-access", atMost: 0.05, what: "authentication and authorization cost" }],
  ownProcess: true,
};

// Issue 13's target: the metrics stage (counting every call by method, protocol and code, with its duration),
// against the same build with METRICS=off.
const metricsStage: Scenario = {
  ...grpc("metrics", "Encrypt", KIB, []),
  servers: ["no-metrics", "cloudplane"],
  targets: [{ kind: "cost", against: "no-metrics", atMost: 0.03, what: "metrics cost" }],
  ownProcess: true,
};

// Issue 10's target: the rate-limit checks with the memory store, on the same build with the key management service
// limited (KMS_RATE_LIMITED) and not (the default), so every Encrypt is counted against its credential's budget.
const rateLimits: Scenario = {
  ...grpc("rate-limits", "Encrypt", KIB, []),
  servers: ["cloudplane", "kms-limited"],
  targets: [{ kind: "cost", against: "cloudplane", atMost: 0.05, what: "rate-limit checks cost" }],
  ownProcess: true,
};

export const allScenarios: Scenario[] = [
  grpc("encrypt-1k", "Encrypt", KIB, GRPC_1K),
  grpc("encrypt-64k", "Encrypt", 64 * KIB, GRPC_64K),
  grpc("decrypt-1k", "Decrypt", KIB, GRPC_1K),
  grpc("decrypt-64k", "Decrypt", 64 * KIB, GRPC_64K),
  getKey,
  restEncrypt,
  connectEncrypt,
  grpcWebEncrypt(false),
  grpcWebEncrypt(true),
  pipelineStages,
  accessStages,
  metricsStage,
  vcdQuery,
  vcdInstantiate,
  rateLimits,
];

export function label(s: Scenario): string {
  return `${s.protocol} ${s.method}${s.payload === "-" ? "" : ` ${s.payload}`}`;
}
