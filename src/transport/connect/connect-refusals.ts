import { Code } from "@connectrpc/connect";
import type { ConnectError } from "@connectrpc/connect";
import { deadlineExceeded, invalidTimeout, malformedBody, notOneMessage, requestTooLarge, unknownCompression } from "../../errors/protocol-errors.js";
import type { BodyEncoding, TimeoutHeader } from "../../errors/protocol-errors.js";
import type { ErrorDomain } from "../../errors/reasons.js";
import { statusPartsOf } from "../../errors/status-details.js";
import type { HeaderSource } from "../../pipeline/call.js";
import { CallError, internalCallError } from "../../pipeline/call-error.js";
import { parseTimeout } from "../../pipeline/stages/deadline.js";
import { acceptedCompressions } from "../compression.js";
import { grpcContentTypeRegExp, grpcWebContentTypeRegExp } from "./connect-internals.js";

export interface RefusalContext {
  domain: ErrorDomain;
  headers: HeaderSource;
  maxMessageBytes: number;
  requestId: string;
}

// An error Connect raised itself, as the error of ours a direct adapter gives for the same request. They are told
// apart by their code, the request's headers and when they happened, never by Connect's words:
// - while the request was read (before the pipeline started, or inside a stream's messages): too large; not a
//   message (Connect reports an undecodable one as INTERNAL, but nothing a caller sends may look like a fault of
//   the server), or, as INVALID_ARGUMENT, a timeout header of the protocol that is not valid (Connect checks it
//   before it reads the body); an unknown compression or a unary call without exactly one message (UNIMPLEMENTED);
// - after the pipeline started: a deadline Connect enforced; anything else failed in writing our answer, a fault
//   of ours.
export function refusalOf(error: ConnectError, whileReading: boolean, ctx: RefusalContext): CallError {
  // Ours already, passed through Connect: a refusal of the body Connect reads (counted-body.ts).
  if (error.cause instanceof CallError) return error.cause;
  const { domain } = ctx;
  if (error.code === Code.DeadlineExceeded) return ours(deadlineExceeded(domain));
  if (!whileReading) return internalCallError(domain, ctx.requestId);
  switch (error.code) {
    case Code.ResourceExhausted:
      return ours(requestTooLarge(domain, ctx.maxMessageBytes));
    case Code.Unimplemented: {
      const encoding = ctx.headers.get("grpc-encoding") ?? ctx.headers.get("content-encoding") ?? ctx.headers.get("connect-content-encoding");
      const known = encoding == null || encoding === "identity" || acceptedCompressions.some((c) => c.name === encoding);
      return ours(known ? notOneMessage(domain) : unknownCompression(domain, encoding, acceptedCompressions.map((c) => c.name)));
    }
    default: {
      const encoding = encodingOf(ctx.headers.get("content-type") ?? "");
      if (error.code === Code.InvalidArgument) {
        // The one timeout header Connect reads for the protocol.
        const header: TimeoutHeader = encoding.startsWith("grpc") ? "grpc-timeout" : "connect-timeout-ms";
        const value = ctx.headers.get(header);
        if (value != null && parseTimeout(header, value) === undefined) return ours(invalidTimeout(domain, header));
      }
      return ours(malformedBody(domain, encoding));
    }
  }
}

function ours(error: Parameters<typeof statusPartsOf>[0]): CallError {
  return new CallError(statusPartsOf(error), false);
}

function encodingOf(contentType: string): BodyEncoding {
  const json = /json/i.test(contentType);
  if (grpcWebContentTypeRegExp.test(contentType)) return json ? "grpc-web-json" : "grpc-web";
  if (grpcContentTypeRegExp.test(contentType)) return json ? "grpc-json" : "grpc";
  return json ? "connect-json" : "connect-proto";
}
