import { ConnectError } from "@connectrpc/connect";
import { printable } from "../../errors/caller-text.js";
import { DomainError } from "../../errors/domain-error.js";
import type { ErrorDomain } from "../../errors/reasons.js";
import { statusPartsOf } from "../../errors/status-details.js";
import { toConnectError } from "../../errors/to-connect-error.js";
import { CallError } from "../../pipeline/call-error.js";
import type { MethodTable } from "../../pipeline/method-table.js";
import { grpcStatusHeaders } from "../grpc/grpc-status.js";
import { retryAfterSeconds } from "../rest/status-json.js";
import type { IncomingHttpHeaders } from "node:http";
import { requestIdOf } from "../../pipeline/call.js";
import type { NodeResponse } from "../node-types.js";
import {
  codeToHttpStatus,
  encodeEnvelope,
  errorToJsonBytes,
  parseConnectContentType,
  parseGrpcContentType,
  parseGrpcWebContentType,
  trailerFlag,
  trailerSerialize,
} from "./connect-internals.js";

// An RPC to a path that names no method this server has. Connect's router knows only the methods it serves, so
// such a request fell through to the REST routes and a gRPC caller got HTTP 404 with a REST JSON body: no
// grpc-status, so @grpc/grpc-js made up "Received HTTP status code 404" and the body's code (NOT_FOUND) was lost. A
// gRPC or gRPC-web caller gets UNIMPLEMENTED as its protocol carries a status ("method not found" is what gRPC's
// status codes document for it), and a Connect caller (connect-protocol-version, or a streaming content type) its
// error JSON with HTTP 404, as the Connect protocol maps unimplemented. Any other request stays the REST surface's.

export interface RpcAnswer {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
  // gRPC's status, sent as trailers after the (empty) body.
  trailers?: Record<string, string>;
}

function unknownProcedure(domain: ErrorDomain, path: string): DomainError {
  return new DomainError({
    code: "unimplemented",
    reason: "PROCEDURE_NOT_FOUND",
    domain,
    message: `this server has no method ${printable(path, 200)}; gRPC server reflection lists the methods it has`,
  });
}

// The domain of the service the path names, when this server has that service; else the server's own.
function domainOf(table: MethodTable, path: string): ErrorDomain {
  const service = path.split("/")[1] ?? "";
  for (const entry of table.entries()) {
    if (entry.method.parent.typeName === service) return entry.policy.domain;
  }
  return "cloudplane";
}

// The answer for a POST to `url` that no method serves, in the protocol its headers name; null, having made nothing,
// for a request of none of the RPC protocols (the REST routes answer it: every REST POST is asked).
export function unknownProcedureAnswer(table: MethodTable, url: string, headers: IncomingHttpHeaders): RpcAnswer | null {
  const path = url.split("?")[0] ?? url;
  return rpcRefusalAnswer(headers, () => unknownProcedure(domainOf(table, path), path), 404);
}

// A refusal answered before any handler, in the RPC protocol the request's headers name; null, having made nothing,
// for a request of none of them. `connectStatus`: the HTTP status of a Connect caller's answer, by default the one
// connect-node gives the refusal's code.
export function rpcRefusalAnswer(headers: IncomingHttpHeaders, refusal: () => DomainError, connectStatus?: number): RpcAnswer | null {
  const contentType = headers["content-type"] ?? "";
  const web = parseGrpcWebContentType(contentType);
  const grpc = web === undefined ? parseGrpcContentType(contentType) : undefined;
  const connect = web === undefined && grpc === undefined ? parseConnectContentType(contentType) : undefined;
  const connectVersion = headers["connect-protocol-version"];
  if (web === undefined && grpc === undefined && (connect === undefined || (!connect.stream && connectVersion === undefined))) return null;
  const given = headers["x-request-id"];
  const requestId = requestIdOf(Array.isArray(given) ? given[0] : given);
  const error: ConnectError = toConnectError(new CallError(statusPartsOf(refusal()), false), null);
  const status: Record<string, string> = {};
  grpcStatusHeaders(error).forEach((value, key) => (status[key] = value));
  // Over plain HTTP (Connect, gRPC-web) a refusal with a RetryInfo carries Retry-After, as refusals of the pipeline do
  // (handler-wrapper.ts): TOO_MANY_OPEN_STREAMS had none (a probe of the docs, 2026-11-28).
  const retryAfter = retryAfterSeconds(error);
  const httpHeaders: Record<string, string> = { "x-request-id": requestId, ...(retryAfter !== undefined ? { "retry-after": String(retryAfter) } : {}) };
  if (grpc !== undefined) {
    // Headers, then the status in trailers, as connect-node answers a failed call: a "trailers-only" block of
    // headers reaches the caller without END_STREAM through Node's compatibility layer, and @grpc/grpc-js reads a
    // status from headers only when they end the stream.
    return { status: 200, headers: { "content-type": contentType, "x-request-id": requestId }, body: new Uint8Array(0), trailers: { ...status, "x-request-id": requestId } };
  }
  if (web !== undefined) {
    const frame = encodeEnvelope(trailerFlag, trailerSerialize(new Headers({ ...status, "x-request-id": requestId })));
    const body = web.text ? Buffer.from(Buffer.from(frame).toString("base64")) : frame;
    const type = web.text ? "application/grpc-web-text+proto" : contentType;
    return { status: 200, headers: { "content-type": type, ...httpHeaders }, body };
  }
  return { status: connectStatus ?? codeToHttpStatus(error.code), headers: { "content-type": "application/json", ...httpHeaders }, body: errorToJsonBytes(error, {}) };
}

// Writes the answer at once, whatever of the body is still to come: a streaming call's client may keep sending
// until it hears back. What is left unread is dropped (HTTP/1.1) or the stream reset after the status (HTTP/2),
// as for every answer (unread-body.ts).
export function answerUnknownProcedure(res: NodeResponse, answer: RpcAnswer): void {
  if (answer.trailers !== undefined) res.addTrailers(answer.trailers);
  res.writeHead(answer.status, answer.headers);
  res.end(answer.body);
}
