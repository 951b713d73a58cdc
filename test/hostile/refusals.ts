import http from "node:http";
import http2 from "node:http2";
import { gzipSync } from "node:zlib";
import { fromBinary } from "@bufbuild/protobuf";
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { adminAuth } from "../support/credentials.js";
import { frame } from "../support/raw-grpc.js";

// One hostile call per protocol, with nothing between the test and the wire, timed from the first byte sent to
// the last one received, and its error in one shape whatever the protocol. Every call gives up after a time
// limit, so that a server that stalls fails the test instead of hanging it. Calls carry the admin's token, so that
// what refuses them is validation, not authentication.

export interface Refusal {
  ms: number;
  // The HTTP status; 200 for gRPC, whose status is in the trailers.
  httpStatus: number;
  // google.rpc.Code.
  code: number;
  message: string;
  reason: string;
  violations: { field: string; description: string }[];
  // What carried the error: the body of REST and Connect, grpc-message and grpc-status-details-bin of gRPC.
  bytes: number;
}

const CALL_TIMEOUT_MS = 20_000;

// Connect names codes in snake case; their index here is the google.rpc.Code number.
const connectCodes = [
  "ok", "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found", "already_exists",
  "permission_denied", "resource_exhausted", "failed_precondition", "aborted", "out_of_range", "unimplemented",
  "internal", "unavailable", "data_loss", "unauthenticated",
];

interface Detail {
  typeName: string;
  value: Uint8Array;
}

function typeNameOf(typeUrl: string): string {
  return typeUrl.slice(typeUrl.lastIndexOf("/") + 1);
}

function refusalOf(ms: number, httpStatus: number, code: number, message: string, details: Detail[], bytes: number): Refusal {
  const find = <D extends DescMessage>(desc: D): MessageShape<D> | undefined => {
    const found = details.find((d) => d.typeName === desc.typeName);
    return found === undefined ? undefined : fromBinary(desc, found.value);
  };
  const violations = (find(BadRequestSchema)?.fieldViolations ?? []).map((v) => ({ field: v.field, description: v.description }));
  return { ms, httpStatus, code, message, reason: find(ErrorInfoSchema)?.reason ?? "", violations, bytes };
}

// A message gzip-compressed in its envelope (flag 1), as a client sends it with grpc-encoding: gzip.
export function gzipFrame(message: Uint8Array): Buffer {
  const framed = frame(gzipSync(message));
  framed[0] = 1;
  return framed;
}

// A unary gRPC call on an HTTP/2 session of its own; `gzip` sends the message compressed (which connect-node
// serves, not the gRPC adapter).
export function grpcCall(url: string, path: string, message: Uint8Array, options: { gzip?: boolean } = {}): Promise<Refusal> {
  const body = options.gzip === true ? gzipFrame(message) : frame(message);
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    session.on("error", reject);
    const started = performance.now();
    const timer = setTimeout(() => session.destroy(new Error(`no answer to ${path} in ${CALL_TIMEOUT_MS} ms`)), CALL_TIMEOUT_MS);
    const encoding = options.gzip === true ? { "grpc-encoding": "gzip" } : {};
    const req = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...adminAuth(url), ...encoding });
    let fields: http2.IncomingHttpHeaders = {};
    let received = 0;
    req.on("response", (headers) => (fields = { ...fields, ...headers }));
    req.on("trailers", (trailers) => (fields = { ...fields, ...trailers }));
    req.on("data", (chunk: Buffer) => (received += chunk.length));
    req.on("error", reject);
    req.on("end", () => {
      const ms = performance.now() - started;
      clearTimeout(timer);
      session.close();
      const message = String(fields["grpc-message"] ?? "");
      const detailsBin = String(fields["grpc-status-details-bin"] ?? "");
      const status = fromBinary(StatusSchema, Buffer.from(detailsBin, "base64"));
      if (status.code !== Number(fields["grpc-status"])) {
        reject(new Error(`grpc-status ${String(fields["grpc-status"])} but grpc-status-details-bin says ${status.code}`));
        return;
      }
      const details = status.details.map((any) => ({ typeName: typeNameOf(any.typeUrl), value: any.value }));
      resolve(refusalOf(ms, Number(fields[":status"]), status.code, status.message, details, received + message.length + detailsBin.length));
    });
    req.end(body);
  });
}

// A unary gRPC-web call over HTTP/1.1: the status is in the trailer frame (flag 0x80) that ends the body.
export async function grpcWebCall(url: string, path: string, message: Uint8Array): Promise<Refusal> {
  const res = await httpCall(url, "POST", path, frame(message), "application/grpc-web+proto");
  const body = res.bytes;
  let at = 0;
  while (at + 5 <= body.length && body[at] !== 0x80) at += 5 + body.readUInt32BE(at + 1);
  const trailer = body.subarray(at + 5, at + 5 + body.readUInt32BE(at + 1)).toString();
  const fields = Object.fromEntries(trailer.split("\r\n").filter((l) => l !== "").map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
  const status = fromBinary(StatusSchema, Buffer.from(fields["grpc-status-details-bin"] ?? "", "base64"));
  const details = status.details.map((any) => ({ typeName: typeNameOf(any.typeUrl), value: any.value }));
  return refusalOf(res.ms, res.status, Number(fields["grpc-status"]), decodeURIComponent(fields["grpc-message"] ?? ""), details, body.length);
}

// An HTTP/1.1 request on a connection of its own.
function httpCall(url: string, method: string, path: string, body: Buffer | undefined, contentType: string): Promise<{ ms: number; status: number; text: string; bytes: Buffer }> {
  return new Promise((resolve, reject) => {
    const headers = { ...adminAuth(url), ...(body === undefined ? {} : { "content-type": contentType, "content-length": body.length }) };
    const started = performance.now();
    const req = http.request(`${url}${path}`, { method, headers, agent: false, timeout: CALL_TIMEOUT_MS }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => {
        const bytes = Buffer.concat(chunks);
        resolve({ ms: performance.now() - started, status: res.statusCode ?? 0, text: bytes.toString(), bytes });
      });
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`no answer to ${method} ${path} in ${CALL_TIMEOUT_MS} ms`)));
    req.on("error", reject);
    req.end(body);
  });
}

interface RestStatusBody {
  code: number;
  message: string;
  details: { typeUrl: string; value: string }[];
}

// A REST call answered with a google.rpc.Status body: {"code", "message", "details": [{"typeUrl", "value"}]}.
export async function restCall(url: string, method: string, path: string, body?: Buffer | string): Promise<Refusal> {
  const res = await httpCall(url, method, path, typeof body === "string" ? Buffer.from(body) : body, "application/json");
  const status = JSON.parse(res.text) as RestStatusBody;
  const details = status.details.map((d) => ({ typeName: typeNameOf(d.typeUrl), value: Buffer.from(d.value, "base64") }));
  return refusalOf(res.ms, res.status, status.code, status.message, details, Buffer.byteLength(res.text));
}

interface ConnectErrorBody {
  code: string;
  message: string;
  details: { type: string; value: string }[];
}

// A unary Connect call (JSON or binary by content type); its error is Connect's JSON error body.
export async function connectCall(url: string, path: string, body: Buffer, contentType: "application/json" | "application/proto"): Promise<Refusal> {
  const res = await httpCall(url, "POST", path, body, contentType);
  const error = JSON.parse(res.text) as ConnectErrorBody;
  const details = error.details.map((d) => ({ typeName: d.type, value: Buffer.from(d.value, "base64") }));
  return refusalOf(res.ms, res.status, connectCodes.indexOf(error.code), error.message, details, Buffer.byteLength(res.text));
}
