import http2 from "node:http2";
import { create, createRegistry, fromBinary, fromJson, getOption, toBinary, toJson } from "@bufbuild/protobuf";
import type { DescMessage, DescMethod, JsonObject, JsonValue, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { AnySchema, anyUnpack } from "@bufbuild/protobuf/wkt";
import { file_google_rpc_error_details } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { http } from "../../gen/google/api/annotations_pb.js";
import { computeJsonRegistry } from "../../src/compute/compute-module.js";
import { frame } from "./raw-grpc.js";

// One call of any method on any protocol with exactly the headers a test gives (no credentials unless it sends
// some), and its answer reduced to what every protocol says alike: the HTTP status, the google.rpc.Code, the
// message and the status details, each decoded to JSON and named by its type. A protocol whose parts disagree with
// each other (grpc-status against grpc-status-details-bin, an HTTP status against the code) throws, so one
// `toEqual` on the answer checks the whole wire form.
//
// gRPC and Connect's binary form go over HTTP/2 (h2c), gRPC-web, Connect JSON and REST over HTTP/1.1 (fetch).

export const wireProtocols = ["grpc", "grpc-web", "connect-json", "connect-binary", "rest"] as const;
// gRPC-web's text form (base64) too, for the tests that compare it with the binary form; served as the binary form
// it encodes (src/transport/connect/grpc-web-text.ts), so it is not repeated in every test of `wireProtocols`.
export type WireProtocol = (typeof wireProtocols)[number] | "grpc-web-text";

export interface WireAnswer {
  // 200 for gRPC and gRPC-web whatever the outcome; the code's HTTP status for Connect and REST.
  http: number;
  // google.rpc.Code; 0 on success.
  code: number;
  message: string;
  // The status details, decoded, each with its message's full name in "@type".
  details: JsonObject[];
  // Response headers (and gRPC trailers), lower-case names.
  headers: Record<string, string>;
  // The response message in canonical JSON, on success.
  response?: JsonValue;
}

const registry = createRegistry(file_google_rpc_error_details, computeJsonRegistry);

// Connect's code names by google.rpc.Code number.
export const connectCodes = [
  "ok",
  "canceled",
  "unknown",
  "invalid_argument",
  "deadline_exceeded",
  "not_found",
  "already_exists",
  "permission_denied",
  "resource_exhausted",
  "failed_precondition",
  "aborted",
  "out_of_range",
  "unimplemented",
  "internal",
  "unavailable",
  "data_loss",
  "unauthenticated",
];

// Connect's mapping of codes to HTTP statuses, which the REST surface uses too (CONTRACT section 4).
const httpOfCode: Record<number, number> = {
  1: 499,
  2: 500,
  3: 400,
  4: 504,
  5: 404,
  6: 409,
  7: 403,
  8: 429,
  9: 400,
  10: 409,
  11: 400,
  12: 501,
  13: 500,
  14: 503,
  15: 500,
  16: 401,
};

export function httpStatusOfCode(code: number): number {
  return httpOfCode[code] ?? 500;
}

function decodeDetail(typeUrl: string, value: Uint8Array): JsonObject {
  const any = create(AnySchema, { typeUrl, value });
  const name = typeUrl.slice(typeUrl.lastIndexOf("/") + 1);
  const desc = registry.getMessage(name);
  if (desc === undefined) throw new Error(`a status detail of unknown type ${typeUrl}`);
  const unpacked = anyUnpack(any, desc);
  if (unpacked === undefined) throw new Error(`could not unpack ${typeUrl}`);
  return { "@type": name, ...(toJson(desc, unpacked, { registry }) as JsonObject) };
}

function statusFromBin(bin: string): { code: number; message: string; details: JsonObject[] } {
  const status = fromBinary(StatusSchema, base64Decode(bin));
  return { code: status.code, message: status.message, details: status.details.map((d) => decodeDetail(d.typeUrl, d.value)) };
}

function flatten(headers: http2.IncomingHttpHeaders | Headers): Record<string, string> {
  const out: Record<string, string> = {};
  if (headers instanceof Headers) {
    headers.forEach((value, name) => (out[name] = value));
    return out;
  }
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !name.startsWith(":")) out[name] = Array.isArray(value) ? value.join(", ") : String(value);
  return out;
}

// The gRPC status of headers or trailers, checked against itself: grpc-status-details-bin must repeat grpc-status
// and grpc-message.
function grpcStatus(status: Record<string, string>): { code: number; message: string; details: JsonObject[] } {
  const code = Number(status["grpc-status"]);
  if (code === 0) return { code, message: "", details: [] };
  const bin = status["grpc-status-details-bin"];
  if (bin === undefined) throw new Error(`grpc-status ${code} without grpc-status-details-bin`);
  const decoded = statusFromBin(bin);
  const shown = decodeURIComponent(status["grpc-message"] ?? "");
  if (decoded.code !== code || shown !== decoded.message) {
    throw new Error(`grpc-status ${code} "${shown}" disagrees with grpc-status-details-bin ${decoded.code} "${decoded.message}"`);
  }
  return decoded;
}

// Length-prefixed messages of a gRPC or gRPC-web body: [flags, payload].
export function frames(body: Buffer): [number, Buffer][] {
  const out: [number, Buffer][] = [];
  let at = 0;
  while (at + 5 <= body.length) {
    const length = body.readUInt32BE(at + 1);
    // A frame not all here yet.
    if (at + 5 + length > body.length) break;
    out.push([body[at]!, body.subarray(at + 5, at + 5 + length)]);
    at += 5 + length;
  }
  return out;
}

// gRPC-web's text form: base64 in segments, each possibly padded (a server may pad each frame it flushes), so
// decoded four characters at a time; anything else throws.
export function fromBase64Segments(text: string): Buffer {
  if (text.length % 4 !== 0 || /[^A-Za-z0-9+/=]/.test(text)) throw new Error(`not base64 segments: ${JSON.stringify(text.slice(0, 80))}`);
  const groups: Buffer[] = [];
  for (let at = 0; at < text.length; at += 4) groups.push(Buffer.from(text.slice(at, at + 4), "base64"));
  return Buffer.concat(groups);
}

// The headers of a gRPC-web trailer frame's payload, lower-case names.
export function trailerFrame(payload: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of payload.toString("latin1").split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon > 0) out[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return out;
}

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  trailers: Record<string, string>;
  body: Buffer;
}

// One HTTP/2 request on a session of its own. `firstMessage`: a streaming call is let go as soon as its first
// message frame (or its end) arrived.
function h2Request(url: string, headers: http2.OutgoingHttpHeaders, body: Buffer, firstMessage = false): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    session.on("error", reject);
    const req = session.request(headers, { endStream: false });
    let response: Record<string, string> = {};
    let status = 0;
    let trailers: Record<string, string> = {};
    const chunks: Buffer[] = [];
    const done = (): void => {
      session.destroy();
      resolve({ status, headers: response, trailers, body: Buffer.concat(chunks) });
    };
    req.on("response", (h) => {
      status = Number(h[":status"]);
      response = flatten(h);
    });
    req.on("trailers", (t) => (trailers = flatten(t)));
    req.on("data", (c: Buffer) => {
      chunks.push(c);
      if (firstMessage && frames(Buffer.concat(chunks)).length > 0) done();
    });
    req.on("end", done);
    req.on("error", reject);
    req.end(body);
  });
}

async function h1Request(url: string, method: string, headers: Record<string, string>, body: Buffer | string | undefined): Promise<RawAnswer> {
  const res = await fetch(url, { method, headers, body: body === undefined ? undefined : typeof body === "string" ? body : new Uint8Array(body) });
  return { status: res.status, headers: flatten(res.headers), trailers: {}, body: Buffer.from(await res.arrayBuffer()) };
}

function decodeResponse(output: DescMessage, bytes: Buffer): JsonValue {
  return toJson(output, fromBinary(output, bytes), { registry });
}

function grpcAnswer(method: DescMethod, raw: RawAnswer): WireAnswer {
  if (raw.status !== 200) throw new Error(`HTTP ${raw.status} for a gRPC call`);
  const statusPart = raw.trailers["grpc-status"] !== undefined ? raw.trailers : raw.headers;
  const headers = { ...raw.headers, ...raw.trailers };
  const messages = frames(raw.body).filter(([flags]) => (flags & 0x80) === 0);
  if (statusPart["grpc-status"] === undefined) {
    // A stream let go after its first message.
    if (messages.length === 0) throw new Error("a gRPC answer with neither grpc-status nor a message");
    return { http: 200, code: 0, message: "", details: [], headers, response: decodeResponse(method.output, messages[0]![1]) };
  }
  const status = grpcStatus(statusPart);
  return { http: 200, ...status, headers, ...(status.code === 0 && messages.length > 0 ? { response: decodeResponse(method.output, messages[0]![1]) } : {}) };
}

function grpcWebAnswer(method: DescMethod, raw: RawAnswer): WireAnswer {
  if (raw.status !== 200) throw new Error(`HTTP ${raw.status} for a gRPC-web call`);
  const all = frames(raw.body);
  const trailer = all.find(([flags]) => (flags & 0x80) !== 0);
  const messages = all.filter(([flags]) => (flags & 0x80) === 0);
  const statusPart = raw.headers["grpc-status"] !== undefined ? raw.headers : trailer === undefined ? undefined : trailerFrame(trailer[1]);
  if (statusPart === undefined) {
    if (messages.length === 0) throw new Error("a gRPC-web answer with neither grpc-status nor a message");
    return { http: 200, code: 0, message: "", details: [], headers: raw.headers, response: decodeResponse(method.output, messages[0]![1]) };
  }
  const status = grpcStatus(statusPart);
  return {
    http: 200,
    ...status,
    headers: { ...raw.headers, ...statusPart },
    ...(status.code === 0 && messages.length > 0 ? { response: decodeResponse(method.output, messages[0]![1]) } : {}),
  };
}

interface ConnectErrorJson {
  code?: string;
  message?: string;
  details?: { type?: string; value?: string }[];
}

function connectError(json: ConnectErrorJson, http: number, headers: Record<string, string>): WireAnswer {
  const code = connectCodes.indexOf(json.code ?? "");
  if (code <= 0) throw new Error(`a Connect error with code ${JSON.stringify(json.code)}`);
  if (http !== 0 && http !== httpStatusOfCode(code)) throw new Error(`HTTP ${http} for Connect code ${json.code}`);
  const details = (json.details ?? []).map((d) => decodeDetail(`type.googleapis.com/${d.type ?? ""}`, base64Decode(d.value ?? "")));
  return { http: http === 0 ? 200 : http, code, message: json.message ?? "", details, headers };
}

function decodeJsonResponse(output: DescMessage, bytes: Buffer): JsonValue {
  return toJson(output, fromJson(output, JSON.parse(bytes.toString("utf8")) as JsonValue, { registry }), { registry });
}

function connectUnaryAnswer(method: DescMethod, raw: RawAnswer, binary: boolean): WireAnswer {
  if (raw.status === 200) {
    const response = binary ? decodeResponse(method.output, raw.body) : decodeJsonResponse(method.output, raw.body);
    return { http: 200, code: 0, message: "", details: [], headers: raw.headers, response };
  }
  if (!(raw.headers["content-type"] ?? "").startsWith("application/json")) throw new Error(`HTTP ${raw.status} with content-type ${raw.headers["content-type"]}`);
  return connectError(JSON.parse(raw.body.toString("utf8")) as ConnectErrorJson, raw.status, raw.headers);
}

// A Connect stream: its first message, or the error of its end-stream message.
function connectStreamAnswer(method: DescMethod, raw: RawAnswer, binary: boolean): WireAnswer {
  if (raw.status !== 200) return connectError(JSON.parse(raw.body.toString("utf8")) as ConnectErrorJson, raw.status, raw.headers);
  for (const [flags, payload] of frames(raw.body)) {
    if ((flags & 0x02) === 0) {
      const response = binary ? decodeResponse(method.output, payload) : decodeJsonResponse(method.output, payload);
      return { http: 200, code: 0, message: "", details: [], headers: raw.headers, response };
    }
    const end = JSON.parse(payload.toString("utf8")) as { error?: ConnectErrorJson };
    if (end.error !== undefined) return connectError(end.error, 0, raw.headers);
    return { http: 200, code: 0, message: "", details: [], headers: raw.headers };
  }
  throw new Error("a Connect stream ended without a message");
}

interface RestStatusJson {
  code?: number;
  message?: string;
  details?: { typeUrl?: string; value?: string }[];
}

// A REST answer as status, headers and body bytes, however it was received.
export function restAnswer(raw: { status: number; headers: Record<string, string>; body: Buffer }): WireAnswer {
  const json = JSON.parse(raw.body.toString("utf8")) as JsonValue;
  if (raw.status === 200) return { http: 200, code: 0, message: "", details: [], headers: raw.headers, response: json };
  if (!(raw.headers["content-type"] ?? "").startsWith("application/json")) throw new Error(`HTTP ${raw.status} with content-type ${raw.headers["content-type"]}`);
  const body = json as RestStatusJson;
  const code = body.code ?? 0;
  if (raw.status !== httpStatusOfCode(code)) throw new Error(`HTTP ${raw.status} for code ${code}`);
  const details = (body.details ?? []).map((d) => decodeDetail(d.typeUrl ?? "", base64Decode(d.value ?? "")));
  return { http: raw.status, code, message: body.message ?? "", details, headers: raw.headers };
}

// The REST request of a message by its google.api.http rule: path variables (dotted ones too) from the message,
// the body ("*") as its canonical JSON, or else its other scalar fields as query parameters.
export function restRequestOf(method: DescMethod, request: MessageShape<DescMessage>): { verb: string; path: string; body: string | undefined } {
  const rule = getOption(method, http);
  const { pattern } = rule;
  if (pattern.case === undefined || pattern.case === "custom") throw new Error(`${method.name} has no REST mapping`);
  // Path variables at their default value too (a version id 0 is sent as "0").
  const byProtoName = toJson(method.input, request, { useProtoFieldName: true, registry, alwaysEmitImplicit: true }) as JsonObject;
  const used = new Set<string>();
  const path = pattern.value.replace(/\{([^}=]+)\}/g, (_m, variable: string) => {
    used.add(variable);
    let value: JsonValue | undefined = byProtoName;
    for (const part of variable.split(".")) value = (value as JsonObject | undefined)?.[part];
    return encodeURIComponent(String(value ?? ""));
  });
  if (rule.body === "*") return { verb: pattern.case.toUpperCase(), path, body: JSON.stringify(toJson(method.input, request, { registry })) };
  const query = new URLSearchParams();
  const json = toJson(method.input, request, { registry }) as JsonObject;
  const add = (prefix: string, value: JsonValue): void => {
    if (Array.isArray(value)) for (const v of value) add(prefix, v);
    else if (typeof value === "object" && value !== null) for (const [k, v] of Object.entries(value)) add(`${prefix}.${k}`, v);
    else query.append(prefix, String(value));
  };
  for (const field of method.input.fields) {
    if (used.has(field.name) || json[field.jsonName] === undefined) continue;
    add(field.jsonName, json[field.jsonName]!);
  }
  const text = query.toString();
  return { verb: pattern.case.toUpperCase(), path: text === "" ? path : `${path}?${text}`, body: undefined };
}

// Calls `method` with `request` over `protocol`, sending exactly `headers` besides the protocol's own.
export async function wireCall<I extends DescMessage>(
  url: string,
  protocol: WireProtocol,
  method: DescMethod & { input: I },
  init: MessageInitShape<I> | MessageShape<I>,
  headers: Record<string, string> = {},
): Promise<WireAnswer> {
  const request = create(method.input, init as MessageInitShape<I>);
  const path = `/${method.parent.typeName}/${method.name}`;
  const streaming = method.methodKind !== "unary";
  const binary = Buffer.from(toBinary(method.input, request));
  switch (protocol) {
    case "grpc":
      return grpcAnswer(
        method,
        await h2Request(url, { ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers }, frame(binary), streaming),
      );
    case "grpc-web":
      if (streaming) {
        return grpcWebAnswer(method, await h2Request(url, { ":method": "POST", ":path": path, "content-type": "application/grpc-web+proto", "x-grpc-web": "1", ...headers }, frame(binary), true));
      }
      return grpcWebAnswer(method, await h1Request(url + path, "POST", { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", ...headers }, frame(binary)));
    case "grpc-web-text": {
      if (streaming) throw new Error("wireCall sends gRPC-web's text form for unary methods only");
      const headersSent = { "content-type": "application/grpc-web-text", accept: "application/grpc-web-text", "x-grpc-web": "1", ...headers };
      const raw = await h1Request(url + path, "POST", headersSent, frame(binary).toString("base64"));
      if (raw.status === 200 && raw.headers["content-type"] !== "application/grpc-web-text+proto") {
        throw new Error(`a gRPC-web text call answered with content-type ${raw.headers["content-type"]}`);
      }
      return grpcWebAnswer(method, { ...raw, body: fromBase64Segments(raw.body.toString("latin1")) });
    }
    case "connect-json":
    case "connect-binary": {
      if (streaming) {
        const contentType = protocol === "connect-json" ? "application/connect+json" : "application/connect+proto";
        const payload = protocol === "connect-json" ? Buffer.from(JSON.stringify(toJson(method.input, request, { registry }))) : binary;
        const raw = await h2Request(url, { ":method": "POST", ":path": path, "content-type": contentType, "connect-protocol-version": "1", ...headers }, frame(payload), true);
        return connectStreamAnswer(method, raw, protocol === "connect-binary");
      }
      if (protocol === "connect-binary") {
        return connectUnaryAnswer(method, await h2Request(url, { ":method": "POST", ":path": path, "content-type": "application/proto", "connect-protocol-version": "1", ...headers }, binary), true);
      }
      const body = JSON.stringify(toJson(method.input, request, { registry }));
      return connectUnaryAnswer(method, await h1Request(url + path, "POST", { "content-type": "application/json", "connect-protocol-version": "1", ...headers }, body), false);
    }
    case "rest": {
      const { verb, path: restPath, body } = restRequestOf(method, request);
      const sent = body === undefined ? headers : { "content-type": "application/json", ...headers };
      return restAnswer(await h1Request(url + restPath, verb, sent, body));
    }
  }
}

// The protocols a method is served on: every unary method on all five; streams on gRPC and Connect, and gRPC-web
// when the client does not stream; REST where it has a google.api.http mapping.
export function wireProtocolsOf(method: DescMethod): WireProtocol[] {
  const rest = getOption(method, http).pattern.case !== undefined;
  if (method.methodKind === "unary") return rest ? [...wireProtocols] : wireProtocols.filter((p) => p !== "rest");
  const clientStreams = method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming";
  return wireProtocols.filter((p) => p !== "rest" && !(clientStreams && p === "grpc-web"));
}
