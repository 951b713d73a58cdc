import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { create, fromBinary } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { AnySchema, anyUnpack } from "@bufbuild/protobuf/wkt";
import { codeToHttpStatus } from "../../src/transport/connect/connect-internals.js";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import type { ErrorInfo } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { connectCodes, fromBase64Segments } from "../support/wire-call.js";
import type { Answer, Headers1 } from "./wire.js";

// What every answer must be, whatever was sent: an answer (no hang, no reset, no dropped connection), never a
// fault of the server (INTERNAL, UNKNOWN, DATA_LOSS, HTTP 5xx), and, when it refuses, an error in the protocol's
// own form that carries a google.rpc.ErrorInfo. Each check returns null when the answer is fine, else what is
// wrong with it.

export type Verdict = string | null;

// Codes that say the server failed, not the caller.
const SERVER_FAULTS = new Map([
  [2, "UNKNOWN"],
  [13, "INTERNAL"],
  [15, "DATA_LOSS"],
]);


// A request id the caller may choose (src/pipeline/call.ts); anything else is replaced by a UUID, never echoed.
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

function checkRequestId(sent: string | undefined, answered: string | undefined): Verdict {
  if (answered === undefined) return "the answer has no x-request-id";
  if (!REQUEST_ID.test(answered)) return `the answer's x-request-id ${JSON.stringify(answered)} is not a plain id`;
  if (sent !== undefined && REQUEST_ID.test(sent) && answered !== sent) return `the caller's x-request-id ${sent} came back as ${answered}`;
  return null;
}

// HTTP/2 forbids leading or trailing whitespace in a header value; nghttp2 resets such a stream before the server
// sees it (PROTOCOL_ERROR), which is not the server's doing.
export function http2ForbidsHeaders(headers: Record<string, string | undefined>): boolean {
  return Object.values(headers).some((v) => v !== undefined && /^[ \t]|[ \t]$/.test(v));
}

// Over HTTP/1.1, a body the server refuses before reading it (too large, no route) is answered at once with
// `Connection: close`, and the connection closed; a client still uploading then fails to write (EPIPE, a reset).
// Node's http client reads the answer all the same; fetch (undici) reports only the failed write. Accepted for
// bodies over 1 MiB, the ones still being written when the answer comes.
const EARLY_ANSWER_BYTES = 1024 * 1024;

export interface Sent {
  headers: Record<string, string | undefined>;
  http2: boolean;
  bodyBytes: number;
  // The call carried the admin's token and no other credential, to a method other than ServiceAuth: it may be
  // refused for anything but its credentials (properties.ts, asAdmin).
  asAdmin: boolean;
}

// UNAUTHENTICATED (16) is an answer only for a call that sent no credentials or bad ones; the admin is never
// refused as unauthenticated, nor denied (PERMISSION_DENIED, 7: it holds the admin role on every scope), nor
// blocked for failed authentications of others (the property servers allow more than the properties make).
function checkAccess(code: number, reason: string, sent: Sent): Verdict {
  if (!sent.asAdmin) return null;
  if (code === 16) return "UNAUTHENTICATED for the admin's token";
  if (code === 7) return `PERMISSION_DENIED (${reason}) for the admin`;
  if (reason === "AUTHENTICATION_RATE_LIMITED") return "the admin was refused as AUTHENTICATION_RATE_LIMITED";
  return null;
}

function noAnswer(answer: Answer, sent: Sent): Verdict {
  if (answer.kind === "answer" || answer.kind === "not sent") return null;
  if (answer.kind === "reset" && sent.http2 && http2ForbidsHeaders(sent.headers) && answer.detail === "RST_STREAM 1") return null;
  if (answer.kind === "reset" && !sent.http2 && sent.bodyBytes > EARLY_ANSWER_BYTES && /EPIPE|ECONNRESET|other side closed/.test(answer.detail)) return null;
  return answer.kind === "hung" ? `no answer within the call timeout (hang: ${answer.detail})` : `no answer: ${answer.detail}`;
}

function errorInfoOf(details: readonly { typeUrl: string; value: Uint8Array }[]): ErrorInfo | undefined {
  for (const any of details) {
    try {
      const info = anyUnpack(create(AnySchema, any), ErrorInfoSchema);
      if (info !== undefined) return info;
    } catch {
      // A detail whose bytes do not decode is no ErrorInfo.
    }
  }
  return undefined;
}

function checkErrorInfo(info: ErrorInfo | undefined): Verdict {
  if (info === undefined) return "the error carries no google.rpc.ErrorInfo";
  if (info.reason === "" || info.domain === "") return `the ErrorInfo has no reason or domain: ${JSON.stringify(info)}`;
  return null;
}

// gRPC status entries (trailers, a trailers-only answer's headers, or a gRPC-web trailer frame).
function checkGrpcStatus(status: Headers1, sent: Sent): Verdict {
  const raw = status["grpc-status"];
  if (raw === undefined) return "no grpc-status";
  const code = Number(raw);
  if (!Number.isInteger(code) || code < 0 || code > 16) return `grpc-status ${raw} is not a code`;
  if (SERVER_FAULTS.has(code)) return `grpc-status ${code} (${SERVER_FAULTS.get(code)})`;
  if (code === 0) return null;
  const bin = status["grpc-status-details-bin"];
  if (bin === undefined) return `grpc-status ${code} without grpc-status-details-bin`;
  let decoded;
  try {
    decoded = fromBinary(StatusSchema, base64Decode(bin));
  } catch {
    return "grpc-status-details-bin is not a google.rpc.Status";
  }
  if (decoded.code !== code) return `grpc-status ${code} but grpc-status-details-bin says ${decoded.code}`;
  const message = status["grpc-message"];
  let shown = "";
  try {
    shown = message === undefined ? "" : decodeURIComponent(message);
  } catch {
    return `grpc-message ${JSON.stringify(message)} is not percent-encoded`;
  }
  // HTTP/2 carries no leading or trailing whitespace in a header value, and gRPC does not percent-encode spaces: a
  // message that ends in one (it quotes a caller's value) loses it in grpc-message. A tab is percent-encoded
  // (%09), so it stays: only spaces are taken off.
  if (shown !== decoded.message.replace(/^ +| +$/g, "")) return `grpc-message ${JSON.stringify(shown)} differs from the status message ${JSON.stringify(decoded.message)}`;
  const info = errorInfoOf(decoded.details);
  return checkErrorInfo(info) ?? checkAccess(code, info!.reason, sent);
}

export function grpcVerdict(answer: Answer, sent: Sent): Verdict {
  const none = noAnswer(answer, sent);
  if (none !== null || answer.kind !== "answer") return none;
  if (answer.status !== 200) return `HTTP ${answer.status} for a gRPC call`;
  // A trailers-only answer has its status in the headers.
  const status = answer.trailers["grpc-status"] !== undefined ? answer.trailers : answer.headers;
  const bad = checkGrpcStatus(status, sent);
  if (bad !== null || status["grpc-status"] === "0") return bad;
  return checkRequestId(sent.headers["x-request-id"], answer.headers["x-request-id"]);
}

// The trailer frame (flag 0x80, 0x81 when compressed with the answer's grpc-encoding) of a gRPC-web body, as
// headers; undefined when there is none.
export function grpcWebTrailer(body: Buffer, encoding: string | undefined): Headers1 | undefined {
  let at = 0;
  while (at + 5 <= body.length) {
    const length = body.readUInt32BE(at + 1);
    if ((body[at]! & 0x80) !== 0) {
      let data = body.subarray(at + 5, at + 5 + length);
      if ((body[at]! & 1) !== 0) {
        try {
          data = encoding === "br" ? brotliDecompressSync(data) : gunzipSync(data);
        } catch {
          return undefined;
        }
      }
      const out: Headers1 = {};
      for (const line of data.toString("latin1").split("\r\n")) {
        const colon = line.indexOf(":");
        if (colon > 0) out[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      return out;
    }
    at += 5 + length;
  }
  return undefined;
}

// gRPC-web's text form decoded; undefined when the body is not base64 segments.
export function base64Segments(body: Buffer): Buffer | undefined {
  try {
    return fromBase64Segments(body.toString("latin1"));
  } catch {
    return undefined;
  }
}

// `frames`: the answer's frames, decoded from base64 for the text form (`text`); undefined when they were not.
export function grpcWebVerdict(answer: Answer, sent: Sent, text: boolean, frames: Buffer | undefined): Verdict {
  const none = noAnswer(answer, sent);
  if (none !== null || answer.kind !== "answer") return none;
  if (answer.status !== 200) return `HTTP ${answer.status} for a gRPC-web call`;
  if (text && answer.headers["content-type"] !== "application/grpc-web-text+proto") return `content-type ${answer.headers["content-type"]} for the text form`;
  if (frames === undefined) return "the text form answered with a body that is not base64";
  const status = answer.headers["grpc-status"] !== undefined ? answer.headers : grpcWebTrailer(frames, answer.headers["grpc-encoding"]);
  if (status === undefined) return "no grpc-status in the headers and no trailer frame in the body";
  const bad = checkGrpcStatus(status, sent);
  if (bad !== null || status["grpc-status"] === "0") return bad;
  return checkRequestId(sent.headers["x-request-id"], answer.headers["x-request-id"]);
}

// The HTTP status of a code on the REST surface (src/transport/rest/status-json.ts: the standard mapping, and two
// reasons of the REST layer with their own).
function restHttpStatus(code: number, reason: string): number {
  if (code === 8 && reason === "REQUEST_TOO_LARGE") return 413;
  if (code === 8 && reason === "REQUEST_HEAD_TOO_LARGE") return 431;
  if (code === 12 && reason === "METHOD_NOT_ALLOWED") return 405;
  return codeToHttpStatus(code);
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}

// REST: never a 5xx; every refusal a JSON google.rpc.Status {code, message, details} with an ErrorInfo among the
// details (each detail an Any as {typeUrl, value}), its HTTP status the one of its code.
export function restVerdict(answer: Answer, sent: Sent, httpMethod: string): Verdict {
  const none = noAnswer(answer, sent);
  if (none !== null || answer.kind !== "answer") return none;
  if (answer.status >= 500) return `HTTP ${answer.status}`;
  if (answer.status < 300) return null;
  // A HEAD answer has no body to check.
  if (httpMethod.toUpperCase() === "HEAD") return null;
  if (!/^application\/json\b/.test(answer.headers["content-type"] ?? "")) return `HTTP ${answer.status} with content-type ${answer.headers["content-type"] ?? "none"}`;
  const body = parseJson(answer.body) as { code?: unknown; message?: unknown; details?: unknown } | undefined;
  if (body === undefined || typeof body !== "object" || body === null) return "the error body is not a JSON object";
  const { code, message, details } = body;
  if (typeof code !== "number" || !Number.isInteger(code) || code < 1 || code > 16) return `the error body's code ${JSON.stringify(code)} is not a google.rpc.Code`;
  if (SERVER_FAULTS.has(code)) return `code ${code} (${SERVER_FAULTS.get(code)})`;
  if (typeof message !== "string") return "the error body has no message";
  if (!Array.isArray(details)) return "the error body has no details";
  const anys = details.map((d: { typeUrl?: unknown; value?: unknown }) => ({
    typeUrl: typeof d.typeUrl === "string" ? d.typeUrl : "",
    value: typeof d.value === "string" ? base64Decode(d.value) : new Uint8Array(),
  }));
  const info = errorInfoOf(anys);
  const bad = checkErrorInfo(info);
  if (bad !== null) return bad;
  const expected = restHttpStatus(code, info!.reason);
  if (answer.status !== expected) return `HTTP ${answer.status} for code ${code} (${info!.reason}); expected ${expected}`;
  return checkAccess(code, info!.reason, sent) ?? checkRequestId(undefined, answer.headers["x-request-id"]);
}

// Connect unary: a non-200 answer is Connect's error JSON {code: "snake_case", message, details: [{type, value}]},
// its HTTP status the one Connect gives the code; a content type Connect does not serve is refused with 415.
export function connectVerdict(answer: Answer, sent: Sent, httpMethod: string, contentType: string): Verdict {
  const none = noAnswer(answer, sent);
  if (none !== null || answer.kind !== "answer") return none;
  if (answer.status === 200) return null;
  const unaryType = /^application\/(proto|json)(; ?charset=utf-?8)?$/i.test(contentType);
  if (httpMethod !== "POST" && answer.status === 405) return null;
  if (!unaryType) return answer.status === 415 ? null : `HTTP ${answer.status} for a content type Connect does not serve`;
  if (answer.status === 415) return "415 for a Connect unary content type";
  const body = parseJson(answer.body) as { code?: unknown; message?: unknown; details?: unknown } | undefined;
  if (body === undefined || typeof body !== "object" || body === null) return `HTTP ${answer.status} without a Connect error body`;
  const index = connectCodes.indexOf(String(body.code));
  if (index <= 0) return `the error body's code ${JSON.stringify(body.code)} is not a Connect code`;
  if (SERVER_FAULTS.has(index)) return `code ${String(body.code)}`;
  if (answer.status !== codeToHttpStatus(index)) return `HTTP ${answer.status} for code ${String(body.code)}`;
  if (answer.status >= 500 && index !== 12 && index !== 4) return `HTTP ${answer.status}`;
  const details = Array.isArray(body.details) ? (body.details as { type?: unknown; value?: unknown }[]) : [];
  const anys = details.map((d) => ({
    typeUrl: `type.googleapis.com/${String(d.type)}`,
    value: typeof d.value === "string" ? base64Decode(d.value) : new Uint8Array(),
  }));
  const info = errorInfoOf(anys);
  const bad = checkErrorInfo(info) ?? checkAccess(index, info!.reason, sent);
  if (bad !== null) return bad;
  return checkRequestId(sent.headers["x-request-id"], answer.headers["x-request-id"]);
}
