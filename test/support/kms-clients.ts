import http from "node:http";
import { fromBinary, toJson } from "@bufbuild/protobuf";
import type { DescMessage, JsonObject, JsonValue, MessageShape } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import type { Any } from "@bufbuild/protobuf/wkt";
import { ConnectError, createClient } from "@connectrpc/connect";
import type { Client, Interceptor } from "@connectrpc/connect";
import { Http2SessionManager, createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import {
  BadRequestSchema,
  ErrorInfoSchema,
  PreconditionFailureSchema,
  ResourceInfoSchema,
} from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import {
  CryptoKeySchema,
  CryptoKeyVersion_Algorithm,
  CryptoKeyVersionSchema,
  KeyManagerService,
} from "../../gen/kms/v1/kms_pb.js";
import type { CryptoKey, CryptoKeyVersion } from "../../gen/kms/v1/kms_pb.js";
import { adminAuth } from "./credentials.js";

// The five ways a caller reaches KeyManagerService, behind one small interface so that one scenario runs over all
// of them. Every client returns keys and versions in canonical proto3 JSON form (RFC 3339 timestamps, "3600s"
// durations, enum names, default values omitted), which is exactly what the REST surface sends, so one `toEqual`
// holds for all five. Every failure is a KmsCallError carrying the google.rpc.Status decoded from the wire.

export const protocols = ["grpc", "connect-json", "connect-binary", "grpc-web", "rest"] as const;
export type Protocol = (typeof protocols)[number];

export type AlgorithmName = "ALGORITHM_UNSPECIFIED" | "AES_128" | "AES_192" | "AES_256";
export type StateName = "STATE_UNSPECIFIED" | "ENABLED" | "DISABLED" | "DESTROYED_SCHEDULED" | "DESTROYED";

export interface KeyVersionJson {
  id?: number;
  keyId?: string;
  state?: StateName;
  algorithm?: AlgorithmName;
  createdAt?: string;
  destroyAt?: string;
}

export interface KeyJson {
  id?: string;
  name?: string;
  description?: string;
  owner?: string;
  primary?: KeyVersionJson;
  labels?: string[];
  rotationPeriod?: string;
  nextRotationTime?: string;
  defaultAlgorithm?: AlgorithmName;
  createdAt?: string;
}

export interface CreateKeyInput {
  // Optional here so that a test can leave it out; the server requires it.
  parentId?: string;
  name?: string;
  description?: string;
  labels?: string[];
  rotationPeriodSeconds?: number;
  defaultAlgorithm?: AlgorithmName;
}

// The new values of the fields an update mask names.
export interface KeyFields {
  name?: string;
  description?: string;
  labels?: string[];
  rotationPeriodSeconds?: number;
  defaultAlgorithm?: AlgorithmName;
}

export interface PageInput {
  limit?: number;
  offset?: number;
}

export interface EncryptInput {
  keyId: string;
  keyVersionId: number;
  plaintext: Uint8Array;
  aad?: Uint8Array;
}

export interface DecryptInput {
  keyId: string;
  ciphertext: Uint8Array;
  aad?: Uint8Array;
}

export interface EncryptResult {
  keyId: string;
  keyVersionId: number;
  ciphertext: Uint8Array;
}

export interface DecryptResult {
  keyId: string;
  keyVersionId: number;
  plaintext: Uint8Array;
}

export interface KmsClient {
  readonly protocol: Protocol;
  createKey(input: CreateKeyInput): Promise<KeyJson>;
  getKey(keyId: string): Promise<KeyJson>;
  // updateMask in the seed's lowerCamel names (name, description, rotationPeriod ...). REST sends them as the
  // string "name,description"; the binary clients send FieldMask paths in proto names.
  updateKey(keyId: string, key: KeyFields, updateMask: string[]): Promise<KeyJson>;
  destroyKey(keyId: string): Promise<JsonObject>;
  listKeys(parentId: string | undefined, page?: PageInput): Promise<KeyJson[]>;
  listVersions(keyId: string, page?: PageInput): Promise<KeyVersionJson[]>;
  createVersion(keyId: string, algorithm?: AlgorithmName): Promise<KeyVersionJson>;
  getVersion(keyId: string, versionId: number): Promise<KeyVersionJson>;
  destroyVersion(keyId: string, versionId: number): Promise<KeyVersionJson>;
  disableVersion(keyId: string, versionId: number): Promise<KeyVersionJson>;
  enableVersion(keyId: string, versionId: number): Promise<KeyVersionJson>;
  restoreVersion(keyId: string, versionId: number): Promise<KeyVersionJson>;
  setPrimary(keyId: string, versionId: number): Promise<KeyJson>;
  encrypt(input: EncryptInput): Promise<EncryptResult>;
  decrypt(input: DecryptInput): Promise<DecryptResult>;
  close(): Promise<void>;
}

// --- errors ------------------------------------------------------------------------------------------------------

export interface KmsFailure {
  // google.rpc.Code
  code: number;
  message: string;
  // Of the ErrorInfo detail; "" when there is none.
  reason: string;
  domain: string;
  fieldViolations: { field: string; description: string }[];
  preconditionViolations: { type: string; subject: string; description: string }[];
  resourceInfo?: { resourceType: string; resourceName: string };
  // Full names of the detail messages, in wire order.
  detailTypes: string[];
  // REST only.
  httpStatus?: number;
}

export class KmsCallError extends Error {
  constructor(readonly failure: KmsFailure) {
    super(`${failure.code} ${failure.reason}: ${failure.message}`);
    this.name = "KmsCallError";
  }
}

// The failure of a call that is expected to fail; a success or any other kind of error fails the test.
export async function failureOf(call: Promise<unknown>): Promise<KmsFailure> {
  try {
    await call;
  } catch (err) {
    if (err instanceof KmsCallError) return err.failure;
    throw err;
  }
  throw new Error("the call succeeded, a failure was expected");
}

// Finds the first detail of a type and decodes it.
type DetailFinder = <D extends DescMessage>(desc: D) => MessageShape<D> | undefined;

// google.rpc.Status parts as they come from grpc-status-details-bin or a REST error body.
function failureFrom(code: number, message: string, detailTypes: string[], find: DetailFinder, httpStatus?: number): KmsFailure {
  const info = find(ErrorInfoSchema);
  const resource = find(ResourceInfoSchema);
  return {
    code,
    message,
    reason: info?.reason ?? "",
    domain: info?.domain ?? "",
    fieldViolations: (find(BadRequestSchema)?.fieldViolations ?? []).map((v) => ({ field: v.field, description: v.description })),
    preconditionViolations: (find(PreconditionFailureSchema)?.violations ?? []).map((v) => ({
      type: v.type,
      subject: v.subject,
      description: v.description,
    })),
    ...(resource === undefined ? {} : { resourceInfo: { resourceType: resource.resourceType, resourceName: resource.resourceName } }),
    detailTypes,
    ...(httpStatus === undefined ? {} : { httpStatus }),
  };
}

function typeNameOf(typeUrl: string): string {
  return typeUrl.slice(typeUrl.lastIndexOf("/") + 1);
}

function failureFromConnect(err: ConnectError): KmsFailure {
  const [info] = err.findDetails(ErrorInfoSchema);
  const [badRequest] = err.findDetails(BadRequestSchema);
  const [precondition] = err.findDetails(PreconditionFailureSchema);
  const [resource] = err.findDetails(ResourceInfoSchema);
  return {
    code: err.code,
    message: err.rawMessage,
    reason: info?.reason ?? "",
    domain: info?.domain ?? "",
    fieldViolations: (badRequest?.fieldViolations ?? []).map((v) => ({ field: v.field, description: v.description })),
    preconditionViolations: (precondition?.violations ?? []).map((v) => ({ type: v.type, subject: v.subject, description: v.description })),
    ...(resource === undefined ? {} : { resourceInfo: { resourceType: resource.resourceType, resourceName: resource.resourceName } }),
    detailTypes: err.details.map((d) => ("desc" in d ? d.desc.typeName : d.type)),
  };
}

// --- JSON helpers -------------------------------------------------------------------------------------------------

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("base64");
}

function fromBase64(text: JsonValue | undefined): Uint8Array {
  return new Uint8Array(Buffer.from(typeof text === "string" ? text : "", "base64"));
}

// Drops undefined members, so that normalized objects have exactly the members the wire had.
function compact<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

// A request body: the members that are set.
function jsonBody(value: Record<string, JsonValue | undefined>): JsonObject {
  return compact(value) as JsonObject;
}

// The fraction of a proto3 JSON timestamp or duration: none, or 3, 6 or 9 digits.
function fraction(nanos: number): string {
  if (nanos === 0) return "";
  let digits = String(nanos).padStart(9, "0");
  if (digits.endsWith("000000")) digits = digits.slice(0, 3);
  else if (digits.endsWith("000")) digits = digits.slice(0, 6);
  return `.${digits}`;
}

// --- gRPC (grpc-js, messages from the .proto files) ---------------------------------------------------------------

const packageDefinition = protoLoader.loadSync("kms/v1/kms.proto", {
  includeDirs: ["proto"],
  keepCase: false,
  longs: String,
  enums: String,
  defaults: false,
  oneofs: true,
});

// Shapes of the messages as @grpc/proto-loader decodes them with the options above.
interface GrpcSeconds {
  seconds?: string;
  nanos?: number;
}

interface GrpcVersion {
  id?: number;
  keyId?: string;
  state?: StateName;
  algorithm?: AlgorithmName;
  createdAt?: GrpcSeconds;
  destroyAt?: GrpcSeconds;
}

interface GrpcKey {
  id?: string;
  name?: string;
  description?: string;
  owner?: string;
  primary?: GrpcVersion;
  labels?: string[];
  rotationPeriod?: GrpcSeconds;
  nextRotationTime?: GrpcSeconds;
  defaultAlgorithm?: AlgorithmName;
  createdAt?: GrpcSeconds;
}

interface GrpcCipher {
  keyId?: string;
  keyVersionId?: number;
  ciphertext?: Buffer;
  plaintext?: Buffer;
}

function timestampJson(ts: GrpcSeconds | undefined): string | undefined {
  if (ts === undefined) return undefined;
  const iso = new Date(Number(ts.seconds ?? "0") * 1000).toISOString();
  return `${iso.slice(0, 19)}${fraction(ts.nanos ?? 0)}Z`;
}

function durationJson(d: GrpcSeconds | undefined): string | undefined {
  if (d === undefined) return undefined;
  return `${d.seconds ?? "0"}${fraction(Math.abs(d.nanos ?? 0))}s`;
}

function versionFromGrpc(v: GrpcVersion | undefined): KeyVersionJson | undefined {
  if (v === undefined) return undefined;
  return compact({
    id: v.id,
    keyId: v.keyId,
    state: v.state,
    algorithm: v.algorithm,
    createdAt: timestampJson(v.createdAt),
    destroyAt: timestampJson(v.destroyAt),
  });
}

function keyFromGrpc(k: GrpcKey): KeyJson {
  return compact({
    id: k.id,
    name: k.name,
    description: k.description,
    owner: k.owner,
    primary: versionFromGrpc(k.primary),
    labels: k.labels,
    rotationPeriod: durationJson(k.rotationPeriod),
    nextRotationTime: timestampJson(k.nextRotationTime),
    defaultAlgorithm: k.defaultAlgorithm,
    createdAt: timestampJson(k.createdAt),
  });
}

function grpcFailure(err: grpc.ServiceError): KmsFailure {
  const [bin] = err.metadata.get("grpc-status-details-bin");
  if (!(bin instanceof Buffer)) return failureFrom(err.code, err.details, [], () => undefined);
  const status = fromBinary(StatusSchema, bin);
  // The trailer's Status must say what grpc-status and grpc-message say. grpc-js decodes grpc-message with
  // decodeURI, which leaves reserved characters (":" "," ...) percent-encoded, hence the second decoding.
  if (status.code !== err.code || (status.message !== err.details && status.message !== percentDecoded(err.details))) {
    throw new Error(`grpc-status ${err.code} "${err.details}" disagrees with grpc-status-details-bin ${status.code} "${status.message}"`);
  }
  const find: DetailFinder = (desc) => {
    for (const any of status.details) {
      const unpacked = anyUnpack(any, desc);
      if (unpacked !== undefined) return unpacked;
    }
    return undefined;
  };
  return failureFrom(status.code, status.message, status.details.map((any: Any) => typeNameOf(any.typeUrl)), find);
}

function percentDecoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function isServiceError(err: unknown): err is grpc.ServiceError {
  return err instanceof Error && "code" in err && "metadata" in err && err.metadata instanceof grpc.Metadata;
}

// The grpc-js client as a promise-returning call per method; exported for tests that send raw requests.
export class GrpcKmsCaller {
  readonly client: grpc.Client;

  constructor(baseUrl: string, options: grpc.ChannelOptions = {}) {
    this.client = new grpc.Client(new URL(baseUrl).host, grpc.credentials.createInsecure(), { interceptors: [withAuthorization(adminAuth(baseUrl).authorization)], ...options });
  }

  call<Response>(method: string, request: object): Promise<Response> {
    const definition = (packageDefinition["kms.v1.KeyManagerService"] as protoLoader.ServiceDefinition)[method];
    if (definition === undefined) throw new Error(`no method KeyManagerService.${method}`);
    return new Promise((resolve, reject) => {
      this.client.makeUnaryRequest(
        definition.path,
        definition.requestSerialize,
        // The loaded definitions are untyped; the interfaces above describe them.
        (bytes: Buffer) => definition.responseDeserialize(bytes) as Response,
        request,
        (error, response) => {
          if (error !== null) {
            // grpcFailure throws on a malformed status; that must reject the call, not escape into grpc-js.
            try {
              reject(isServiceError(error) ? new KmsCallError(grpcFailure(error)) : error);
            } catch (decodeError) {
              reject(decodeError);
            }
          }
          else if (response === undefined) reject(new Error(`${method}: no response`));
          else resolve(response);
        },
      );
    });
  }

  close(): void {
    this.client.close();
  }
}

function grpcClient(baseUrl: string): KmsClient {
  const caller = new GrpcKmsCaller(baseUrl);
  const call = <R>(method: string, request: object) => caller.call<R>(method, request);
  const duration = (seconds: number | undefined) => (seconds === undefined ? undefined : { seconds: String(seconds) });
  const target = (keyId: string, keyVersionId: number) => ({ keyId, keyVersionId });
  const version = async (method: string, keyId: string, versionId: number) =>
    versionFromGrpc(await call<GrpcVersion>(method, target(keyId, versionId))) ?? {};
  return {
    protocol: "grpc",
    async createKey(input) {
      const { rotationPeriodSeconds, ...rest } = input;
      return keyFromGrpc(await call<GrpcKey>("CreateCryptoKey", compact({ ...rest, rotationPeriod: duration(rotationPeriodSeconds) })));
    },
    async getKey(keyId) {
      return keyFromGrpc(await call<GrpcKey>("GetCryptoKey", { keyId }));
    },
    async updateKey(keyId, key, updateMask) {
      const { rotationPeriodSeconds, ...rest } = key;
      const fields = compact({ ...rest, rotationPeriod: duration(rotationPeriodSeconds) });
      const paths = updateMask.map((p) => p.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));
      return keyFromGrpc(await call<GrpcKey>("UpdateCryptoKey", { key: { ...fields, id: keyId }, updateMask: { paths } }));
    },
    async destroyKey(keyId) {
      return call<JsonObject>("DestroyCryptoKey", { keyId });
    },
    async listKeys(parentId, page) {
      const res = await call<{ keys?: GrpcKey[] }>("ListCryptoKeys", compact({ parentId, page }));
      return (res.keys ?? []).map(keyFromGrpc);
    },
    async listVersions(keyId, page) {
      const res = await call<{ versions?: GrpcVersion[] }>("ListCryptoKeyVersions", compact({ keyId, page }));
      return (res.versions ?? []).map((v) => versionFromGrpc(v) ?? {});
    },
    async createVersion(keyId, algorithm) {
      return versionFromGrpc(await call<GrpcVersion>("CreateCryptoKeyVersion", compact({ keyId, algorithm }))) ?? {};
    },
    getVersion: (keyId, versionId) => version("GetCryptoKeyVersion", keyId, versionId),
    destroyVersion: (keyId, versionId) => version("DestroyCryptoKeyVersion", keyId, versionId),
    disableVersion: (keyId, versionId) => version("DisableCryptoKeyVersion", keyId, versionId),
    enableVersion: (keyId, versionId) => version("EnableCryptoKeyVersion", keyId, versionId),
    restoreVersion: (keyId, versionId) => version("RestoreCryptoKeyVersion", keyId, versionId),
    async setPrimary(keyId, versionId) {
      return keyFromGrpc(await call<GrpcKey>("UpdateCryptoKeyPrimaryVersion", target(keyId, versionId)));
    },
    async encrypt(input) {
      const res = await call<GrpcCipher>("Encrypt", {
        keyId: input.keyId,
        keyVersionId: input.keyVersionId,
        plaintext: Buffer.from(input.plaintext),
        additionalAuthenticatedData: Buffer.from(input.aad ?? new Uint8Array()),
      });
      return { keyId: res.keyId ?? "", keyVersionId: res.keyVersionId ?? 0, ciphertext: new Uint8Array(res.ciphertext ?? []) };
    },
    async decrypt(input) {
      const res = await call<GrpcCipher>("Decrypt", {
        keyId: input.keyId,
        ciphertext: Buffer.from(input.ciphertext),
        additionalAuthenticatedData: Buffer.from(input.aad ?? new Uint8Array()),
      });
      return { keyId: res.keyId ?? "", keyVersionId: res.keyVersionId ?? 0, plaintext: new Uint8Array(res.plaintext ?? []) };
    },
    async close() {
      caller.close();
    },
  };
}

// --- Connect JSON, Connect binary, gRPC-web (generated client over real sockets) ----------------------------------

function algorithmNumber(name: AlgorithmName | undefined): CryptoKeyVersion_Algorithm | undefined {
  return name === undefined ? undefined : CryptoKeyVersion_Algorithm[name];
}

function keyJson(key: CryptoKey): KeyJson {
  return toJson(CryptoKeySchema, key) as KeyJson;
}

function versionJson(version: CryptoKeyVersion): KeyVersionJson {
  return toJson(CryptoKeyVersionSchema, version) as KeyVersionJson;
}

async function connectCall<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (err) {
    if (err instanceof ConnectError) throw new KmsCallError(failureFromConnect(err));
    throw err;
  }
}

function generatedClient(protocol: Protocol, client: Client<typeof KeyManagerService>, close: () => void): KmsClient {
  const c = connectCall;
  const target = (keyId: string, keyVersionId: number) => ({ keyId, keyVersionId });
  const duration = (seconds: number | undefined) => (seconds === undefined ? undefined : { seconds: BigInt(seconds) });
  return {
    protocol,
    async createKey(input) {
      return keyJson(
        await c(
          client.createCryptoKey({
            ...compact({ parentId: input.parentId, name: input.name, description: input.description, labels: input.labels }),
            rotationPeriod: duration(input.rotationPeriodSeconds),
            defaultAlgorithm: algorithmNumber(input.defaultAlgorithm),
          }),
        ),
      );
    },
    async getKey(keyId) {
      return keyJson(await c(client.getCryptoKey({ keyId })));
    },
    async updateKey(keyId, key, updateMask) {
      const paths = updateMask.map((p) => p.replace(/[A-Z]/g, (ch) => `_${ch.toLowerCase()}`));
      const fields = {
        ...compact({ id: keyId, name: key.name, description: key.description, labels: key.labels }),
        rotationPeriod: duration(key.rotationPeriodSeconds),
        defaultAlgorithm: algorithmNumber(key.defaultAlgorithm),
      };
      return keyJson(await c(client.updateCryptoKey({ key: fields, updateMask: { paths } })));
    },
    async destroyKey(keyId) {
      await c(client.destroyCryptoKey({ keyId }));
      return {};
    },
    async listKeys(parentId, page) {
      const res = await c(client.listCryptoKeys({ parentId, page }));
      return res.keys.map(keyJson);
    },
    async listVersions(keyId, page) {
      const res = await c(client.listCryptoKeyVersions({ keyId, page }));
      return res.versions.map(versionJson);
    },
    async createVersion(keyId, algorithm) {
      return versionJson(await c(client.createCryptoKeyVersion({ keyId, algorithm: algorithmNumber(algorithm) })));
    },
    getVersion: async (keyId, v) => versionJson(await c(client.getCryptoKeyVersion(target(keyId, v)))),
    destroyVersion: async (keyId, v) => versionJson(await c(client.destroyCryptoKeyVersion(target(keyId, v)))),
    disableVersion: async (keyId, v) => versionJson(await c(client.disableCryptoKeyVersion(target(keyId, v)))),
    enableVersion: async (keyId, v) => versionJson(await c(client.enableCryptoKeyVersion(target(keyId, v)))),
    restoreVersion: async (keyId, v) => versionJson(await c(client.restoreCryptoKeyVersion(target(keyId, v)))),
    async setPrimary(keyId, versionId) {
      return keyJson(await c(client.updateCryptoKeyPrimaryVersion(target(keyId, versionId))));
    },
    async encrypt(input) {
      const res = await c(
        client.encrypt({
          keyId: input.keyId,
          keyVersionId: input.keyVersionId,
          plaintext: input.plaintext,
          additionalAuthenticatedData: input.aad,
        }),
      );
      return { keyId: res.keyId, keyVersionId: res.keyVersionId, ciphertext: res.ciphertext };
    },
    async decrypt(input) {
      const res = await c(client.decrypt({ keyId: input.keyId, ciphertext: input.ciphertext, additionalAuthenticatedData: input.aad }));
      return { keyId: res.keyId, keyVersionId: res.keyVersionId, plaintext: res.plaintext };
    },
    async close() {
      close();
    },
  };
}

// --- REST (plain fetch against the documented paths) -------------------------------------------------------------

export interface RestResponse {
  status: number;
  contentType: string | null;
  headers: Headers;
  text: string;
  // The parsed body; undefined when it is not JSON.
  json: JsonValue | undefined;
}

export interface RestRequestOptions {
  // A string is sent as is; anything else as JSON.
  body?: string | JsonValue;
  contentType?: string | null;
  headers?: Record<string, string>;
}

// One HTTP call, nothing interpreted.
export async function restRequest(baseUrl: string, method: string, path: string, opts: RestRequestOptions = {}): Promise<RestResponse> {
  // The server's admin token unless the test sends credentials of its own (or says "none" with an empty header).
  const headers: Record<string, string> = { ...adminAuth(baseUrl), ...opts.headers };
  if (headers["authorization"] === "") delete headers["authorization"];
  let body: string | undefined;
  if (opts.body !== undefined) {
    body = typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body);
    const contentType = opts.contentType === undefined ? "application/json" : opts.contentType;
    if (contentType !== null) headers["content-type"] = contentType;
  }
  const res = await fetch(`${baseUrl}${path}`, { method, headers, body });
  const text = await res.text();
  let json: JsonValue | undefined;
  try {
    json = JSON.parse(text) as JsonValue;
  } catch {
    json = undefined;
  }
  return { status: res.status, contentType: res.headers.get("content-type"), headers: res.headers, text, json };
}

interface RestStatusBody {
  code?: number;
  message?: string;
  details?: { typeUrl?: string; value?: string }[];
}

// Decodes a REST error body {"code", "message", "details": [{"typeUrl", "value"}]}.
export function restFailure(res: RestResponse): KmsFailure {
  if (typeof res.json !== "object" || res.json === null || Array.isArray(res.json)) {
    throw new Error(`HTTP ${res.status} without a JSON status body: ${res.text.slice(0, 200)}`);
  }
  const body = res.json as RestStatusBody;
  const details = (body.details ?? []).map((d) => ({ typeName: typeNameOf(d.typeUrl ?? ""), value: fromBase64(d.value) }));
  const find: DetailFinder = (desc) => {
    const found = details.find((d) => d.typeName === desc.typeName);
    return found === undefined ? undefined : fromBinary(desc, found.value);
  };
  return failureFrom(body.code ?? 0, body.message ?? "", details.map((d) => d.typeName), find, res.status);
}

// A REST call that must succeed with 200 and a JSON body; anything else that is a status body is a KmsCallError.
export async function restCall(baseUrl: string, method: string, path: string, body?: JsonValue): Promise<JsonObject> {
  const res = await restRequest(baseUrl, method, path, body === undefined ? {} : { body });
  if (res.status !== 200) {
    if (res.contentType !== "application/json") throw new Error(`HTTP ${res.status} with content-type ${res.contentType}`);
    throw new KmsCallError(restFailure(res));
  }
  if (res.contentType !== "application/json") throw new Error(`${method} ${path}: 200 with content-type ${res.contentType}`);
  if (typeof res.json !== "object" || res.json === null || Array.isArray(res.json)) throw new Error(`${method} ${path}: not a JSON object`);
  return res.json;
}

function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined) q.append(name, String(value));
  const text = q.toString();
  return text === "" ? "" : `?${text}`;
}

function restClient(baseUrl: string): KmsClient {
  const call = (method: string, path: string, body?: JsonValue) => restCall(baseUrl, method, path, body);
  const key = (id: string) => `/v1/keys/${encodeURIComponent(id)}`;
  const version = (id: string, v: number) => `${key(id)}/versions/${v}`;
  const duration = (seconds: number | undefined) => (seconds === undefined ? undefined : `${seconds}s`);
  return {
    protocol: "rest",
    async createKey(input) {
      const { rotationPeriodSeconds, ...rest } = input;
      return (await call("POST", "/v1/keys", jsonBody({ ...rest, rotationPeriod: duration(rotationPeriodSeconds) }))) as KeyJson;
    },
    async getKey(keyId) {
      return (await call("GET", key(keyId))) as KeyJson;
    },
    async updateKey(keyId, fields, updateMask) {
      const { rotationPeriodSeconds, ...rest } = fields;
      const body = jsonBody({ ...rest, rotationPeriod: duration(rotationPeriodSeconds) });
      return (await call("PATCH", key(keyId), { key: body, updateMask: updateMask.join(",") })) as KeyJson;
    },
    destroyKey: (keyId) => call("DELETE", key(keyId)),
    async listKeys(parentId, page) {
      const res = await call("GET", `/v1/keys${query({ parentId, "page.limit": page?.limit, "page.offset": page?.offset })}`);
      return (res.keys ?? []) as KeyJson[];
    },
    async listVersions(keyId, page) {
      const res = await call("GET", `${key(keyId)}/versions${query({ "page.limit": page?.limit, "page.offset": page?.offset })}`);
      return (res.versions ?? []) as KeyVersionJson[];
    },
    async createVersion(keyId, algorithm) {
      return (await call("POST", `${key(keyId)}/versions`, jsonBody({ algorithm }))) as KeyVersionJson;
    },
    getVersion: async (keyId, v) => (await call("GET", version(keyId, v))) as KeyVersionJson,
    destroyVersion: async (keyId, v) => (await call("DELETE", version(keyId, v))) as KeyVersionJson,
    // The seed sends no payload on these.
    disableVersion: async (keyId, v) => (await call("POST", `${version(keyId, v)}/disable`, {})) as KeyVersionJson,
    enableVersion: async (keyId, v) => (await call("POST", `${version(keyId, v)}/enable`, {})) as KeyVersionJson,
    restoreVersion: async (keyId, v) => (await call("POST", `${version(keyId, v)}/restore`, {})) as KeyVersionJson,
    setPrimary: async (keyId, v) => (await call("PATCH", `${version(keyId, v)}/primary`)) as KeyJson,
    async encrypt(input) {
      const res = await call("POST", "/v1/encrypt", {
        keyId: input.keyId,
        keyVersionId: input.keyVersionId,
        plaintext: base64(input.plaintext),
        ...(input.aad === undefined ? {} : { additionalAuthenticatedData: base64(input.aad) }),
      });
      return { keyId: String(res.keyId ?? ""), keyVersionId: Number(res.keyVersionId ?? 0), ciphertext: fromBase64(res.ciphertext) };
    },
    async decrypt(input) {
      const res = await call("POST", "/v1/decrypt", {
        keyId: input.keyId,
        ciphertext: base64(input.ciphertext),
        ...(input.aad === undefined ? {} : { additionalAuthenticatedData: base64(input.aad) }),
      });
      return { keyId: String(res.keyId ?? ""), keyVersionId: Number(res.keyVersionId ?? 0), plaintext: fromBase64(res.plaintext) };
    },
    async close() {},
  };
}

// A grpc-js interceptor that sends `authorization` on every call (grpc-js will not combine call credentials with an
// insecure channel).
export function withAuthorization(authorization: string): grpc.Interceptor {
  return (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        if (metadata.get("authorization").length === 0) metadata.set("authorization", authorization);
        next(metadata, listener);
      },
    });
}

// A Connect interceptor that sends the admin token of the server at `baseUrl` unless the call has credentials.
export function adminAuthInterceptor(baseUrl: string): Interceptor {
  return (next) => (req) => {
    if (!req.header.has("authorization")) req.header.set("authorization", adminAuth(baseUrl).authorization);
    return next(req);
  };
}

// --- the factory --------------------------------------------------------------------------------------------------

// Connect JSON over HTTP/1.1, Connect binary over HTTP/2 (h2c), gRPC-web over HTTP/1.1: each with its own
// connection pool, closed by close().
export function createKmsClient(protocol: Protocol, baseUrl: string): KmsClient {
  switch (protocol) {
    case "grpc":
      return grpcClient(baseUrl);
    case "rest":
      return restClient(baseUrl);
    case "connect-json": {
      const agent = new http.Agent({ keepAlive: true });
      const transport = createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false, nodeOptions: { agent } , interceptors: [adminAuthInterceptor(baseUrl)] });
      return generatedClient(protocol, createClient(KeyManagerService, transport), () => agent.destroy());
    }
    case "connect-binary": {
      const sessionManager = new Http2SessionManager(baseUrl);
      const transport = createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true, sessionManager , interceptors: [adminAuthInterceptor(baseUrl)] });
      return generatedClient(protocol, createClient(KeyManagerService, transport), () => sessionManager.abort());
    }
    case "grpc-web": {
      const agent = new http.Agent({ keepAlive: true });
      const transport = createGrpcWebTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true, nodeOptions: { agent } , interceptors: [adminAuthInterceptor(baseUrl)] });
      return generatedClient(protocol, createClient(KeyManagerService, transport), () => agent.destroy());
    }
  }
}
