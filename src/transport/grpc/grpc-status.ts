import { ConnectError } from "@connectrpc/connect";
import { wellFormed } from "../../errors/caller-text.js";
import { setTrailerStatus } from "../connect/connect-internals.js";

// The status headers of a failed gRPC call: grpc-status, grpc-message and grpc-status-details-bin, built by
// Connect's setTrailerStatus, except grpc-message, which is encoded as the gRPC spec has it (PROTOCOL-HTTP2.md,
// "Percent-Encoded"): printable ASCII other than "%" as it is, every other byte of the UTF-8 message as %XX.
// Connect encodes every reserved character ("parentId: is required" becomes "parentId%3A%20is%20required"),
// which decoders may accept, but @grpc/grpc-js decodes with decodeURI and would show callers the "%3A".
// A lone surrogate in the message becomes U+FFFD, in grpc-message and grpc-status-details-bin alike (Connect's
// encodeURIComponent would throw URIError on it).
export function grpcStatusHeaders(error: ConnectError): Headers {
  const message = wellFormed(error.rawMessage);
  // Without the error's metadata, which setTrailerStatus would add too: callers place that themselves.
  const bare = new ConnectError(message, error.code);
  bare.details.push(...error.details);
  const headers = setTrailerStatus(new Headers(), bare);
  headers.set("grpc-message", encodeGrpcMessage(message));
  return headers;
}

// A lone surrogate is written as U+FFFD (EF BF BD), as Buffer.from writes it.
export function encodeGrpcMessage(message: string): string {
  let out = "";
  for (const byte of Buffer.from(message, "utf8")) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}
