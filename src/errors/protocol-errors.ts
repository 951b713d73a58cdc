import { Code } from "@connectrpc/connect";
import { quoted } from "./caller-text.js";
import { DomainError, invalidArgument } from "./domain-error.js";
import type { ErrorDomain } from "./reasons.js";
import type { ViolationList } from "./violation-list.js";

// Refusals of a request that breaks a rule of its protocol, before any handler runs. One constructor each, used
// by every adapter and by the completion of the errors Connect raises itself, so that a caller sees the same
// code, message and details whichever path served the call. `domain` is the ErrorInfo.domain of the service the
// call was for.

export function requestTooLarge(domain: ErrorDomain, maxBytes: number): DomainError {
  const description = `at most ${maxBytes} bytes per request`;
  return new DomainError({
    code: "resource_exhausted",
    reason: "REQUEST_TOO_LARGE",
    domain,
    message: `the request is larger than ${maxBytes} bytes`,
    violations: [{ subject: "request", description }],
  });
}

// A compressed request that expands past what its size allows (src/transport/compression.ts).
export function compressedRequestTooLarge(domain: ErrorDomain, compressedBytes: number, allowedBytes: number): DomainError {
  return new DomainError({
    code: "resource_exhausted",
    reason: "REQUEST_TOO_LARGE",
    domain,
    message: `the request's ${compressedBytes} compressed bytes expand past ${allowedBytes}: a compressed request may expand to 64 times its size or 256 KiB, whichever is more; send a larger one uncompressed`,
    violations: [{ subject: "request", description: "decompressed, at most 64 times the compressed size or 256 KiB, whichever is more" }],
  });
}

// An HTTP/1.1 request head (request line and headers) over what Node's parser takes (`maxBytes`, Node's
// http.maxHeaderSize), refused before the server sees it (src/transport/rest/parser-refusals.ts).
export function requestHeadTooLarge(domain: ErrorDomain, maxBytes: number): DomainError {
  return new DomainError({
    code: "resource_exhausted",
    reason: "REQUEST_HEAD_TOO_LARGE",
    domain,
    message: `the request line and headers are larger than ${maxBytes} bytes`,
    violations: [{ subject: "request head", description: `at most ${maxBytes} bytes of request line and headers` }],
  });
}

// An HTTP/1.1 request that Node's parser cannot read (a request line, header or chunk not of HTTP's form).
export function requestNotParsed(domain: ErrorDomain): DomainError {
  return protocolError(domain, Code.InvalidArgument, "the request is not well-formed HTTP/1.1");
}

// A request over the limits its type declares (src/pipeline/message-limits.ts), found by counting its elements
// before decoding it: the same INVALID_ARGUMENT the domain checks give for too many labels, one violation per
// field over its bound.
export function overLimits(domain: ErrorDomain, violations: ViolationList): DomainError {
  return invalidArgument(domain, violations);
}

// A member of a JSON request that its message does not have, named by its JSON path: INVALID_ARGUMENT UNKNOWN_FIELD
// on REST and on Connect's JSON forms alike. Connect's JSON ignored such a member, and an unknown enum name with it,
// so a misspelt "descripton" under an update mask cleared the description and "AES_192_GCM" became AES_256, where
// REST refused both (docs/callers.md).
export function unknownJsonField(domain: ErrorDomain, path: string, name: string, typeName: string): DomainError {
  return invalidArgument(domain, [{ field: path, description: unknownFieldDescription(name, typeName) }], "UNKNOWN_FIELD");
}

export function unknownFieldDescription(name: string, typeName: string): string {
  return `unknown field ${quoted(name)} in ${typeName}`;
}

// What the body of each protocol must be, for the message of a body that is not.
const expectedBodies = {
  grpc: "the request is not one uncompressed protobuf message in a gRPC envelope",
  "grpc-web": "the request is not one uncompressed protobuf message in a gRPC-web envelope",
  // application/grpc+json and application/grpc-web+json: the message in the envelope is JSON.
  "grpc-json": "the request is not one uncompressed JSON message of the method's request type in a gRPC envelope",
  "grpc-web-json": "the request is not one uncompressed JSON message of the method's request type in a gRPC-web envelope",
  "grpc-web-text": "the request is not base64 (groups of four characters of A-Z a-z 0-9 + /, padded with =) of gRPC-web envelopes",
  "connect-proto": "the request body is not a protobuf message of the method's request type",
  "connect-json": "the request body is not a JSON object of the method's request type",
} as const;

export type BodyEncoding = keyof typeof expectedBodies;

export function malformedBody(domain: ErrorDomain, encoding: BodyEncoding): DomainError {
  return invalidArgument(domain, [{ field: "", description: expectedBodies[encoding] }], "MALFORMED_BODY");
}

// gRPC and Connect streams frame messages in envelopes; a unary call has exactly one. Connect answers a call
// with none or with two as UNIMPLEMENTED, and so do the direct adapters.
export function notOneMessage(domain: ErrorDomain): DomainError {
  return protocolError(domain, Code.Unimplemented, "a unary call sends exactly one request message");
}

export function unknownCompression(domain: ErrorDomain, name: string, accepted: readonly string[]): DomainError {
  return protocolError(domain, Code.Unimplemented, `unknown compression ${quoted(name)}: the server accepts ${accepted.join(", ")}`);
}

// A path that exists, a REST route or an RPC method, called with an HTTP method it does not take (`allow` lists
// those it does, for the Allow header RFC 9110 15.5.6 requires). The standard mapping of UNIMPLEMENTED is HTTP 501;
// the JSON Status of a REST or RPC path answers 405 for this reason (status-json.ts). The path belongs to a
// service, whose domain the error carries.
export function methodNotAllowed(domain: ErrorDomain, httpMethod: string, path: string, allow: readonly string[]): DomainError {
  return new DomainError({
    code: "unimplemented",
    reason: "METHOD_NOT_ALLOWED",
    domain,
    message: `${path} does not accept ${httpMethod}; allowed: ${allow.join(", ")}`,
    metadata: { allow: allow.join(", ") },
  });
}

// A call open by design (a health Watch, streaming reflection) past the server's limits of them (long-lived-calls.ts).
export function tooManyOpenStreams(max: number, perConnection: number): DomainError {
  return new DomainError({
    code: "resource_exhausted",
    reason: "TOO_MANY_OPEN_STREAMS",
    domain: "cloudplane",
    message: `this server holds at most ${max} open health watches and reflection streams, ${perConnection} on one connection: close one, or retry later`,
    violations: [
      { subject: "server", description: `at most ${max} open health watches and reflection streams (MAX_LONG_LIVED_CALLS)` },
      { subject: "connection", description: `at most ${perConnection} on one connection (MAX_LONG_LIVED_CALLS_PER_CONNECTION)` },
    ],
    retryAfterSeconds: 1,
  });
}

// How a call open by design (a health Watch) ends when the server stops gracefully, after its NOT_SERVING, and how a
// call that arrives once the stop has begun is refused (the pipeline's shutdown stage).
export function serverShuttingDown(domain: ErrorDomain): DomainError {
  return new DomainError({
    code: "unavailable",
    reason: "SERVER_SHUTTING_DOWN",
    domain,
    message: "the server is shutting down",
    retryAfterSeconds: 1,
  });
}

export function deadlineExceeded(domain: ErrorDomain): DomainError {
  return new DomainError({
    code: "deadline_exceeded",
    reason: "DEADLINE_EXCEEDED",
    domain,
    message: "the call did not finish within its deadline",
  });
}

// What each timeout header must be, as the gRPC (PROTOCOL-HTTP2.md) and Connect specifications have it.
const timeoutForms = {
  "grpc-timeout": "must be 1 to 8 digits and a unit, one of H M S m u n",
  "connect-timeout-ms": "must be 1 to 10 digits, the timeout in milliseconds",
} as const;

export type TimeoutHeader = keyof typeof timeoutForms;

// A grpc-timeout or connect-timeout-ms that is not of its form: INVALID_ARGUMENT, as Connect's implementations
// answer it (connect-es for both headers). gRPC's specification does not say, and its implementations differ:
// grpc-go answers INTERNAL, which blames the server for the caller's mistake; others ignore the header, which
// runs the call without the deadline its caller meant to set. A refusal that names the header tells the caller
// what to fix. The same on every protocol and path (docs/errors.md): the protocol's own header (grpc-timeout on
// gRPC and gRPC-web, connect-timeout-ms on Connect) before the body is read, as Connect refuses it; the other
// header, and a REST caller's, by the deadline stage.
export function invalidTimeout(domain: ErrorDomain, header: TimeoutHeader): DomainError {
  return protocolError(domain, Code.InvalidArgument, `${header} ${timeoutForms[header]}`);
}

// An empty Host header on a call whose answer holds links: HTTP/1.1 allows the empty value, but it leaves the request's
// URI with no host, which RFC 9110 (section 4.2.1) says a recipient MUST reject as invalid.
export function emptyHost(domain: ErrorDomain): DomainError {
  return protocolError(domain, Code.InvalidArgument, "the Host header is empty: the links of this answer need the host the request was sent to (RFC 9110, section 4.2.1)");
}

// Another rule of the protocol (an unknown compression, a unary call without its one message, a header that is
// not valid): `code` is the one the protocol gives it, `message` says what was wrong and never quotes the request.
export function protocolError(domain: ErrorDomain, code: Code, message: string): DomainError {
  if (code === Code.InvalidArgument) return invalidArgument(domain, [{ field: "", description: message }], "PROTOCOL_ERROR");
  return new DomainError({ code: "protocol", grpcCode: code, reason: "PROTOCOL_ERROR", domain, message });
}
