import { ConnectError } from "@connectrpc/connect";
import type { CallError } from "../pipeline/call-error.js";
import { wellFormed } from "./caller-text.js";

// A failed call as a ConnectError, the form every adapter renders from (gRPC trailers, Connect's error JSON, a
// REST google.rpc.Status body). `headers` are the call's response headers (x-request-id ...), which gRPC and
// Connect send with the error. The message is made well-formed: a message quoting a caller's string field with a
// lone surrogate (possible in JSON, "\ud800") would make Connect's setTrailerStatus throw instead of answering.
export function toConnectError(error: CallError, headers: readonly [string, string][] | null): ConnectError {
  const { code, message, details } = error.status;
  return new ConnectError(wellFormed(message), code, headers === null ? undefined : [...headers], details, error);
}
