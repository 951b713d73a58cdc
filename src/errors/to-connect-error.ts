import { ConnectError } from "@connectrpc/connect";
import type { CallError } from "../pipeline/call-error.js";

// A failed call as a ConnectError, the form every adapter renders from (gRPC trailers, Connect's error JSON, a
// REST google.rpc.Status body). `headers` are the call's response headers (x-request-id ...), which gRPC and
// Connect send with the error.
export function toConnectError(error: CallError, headers: readonly [string, string][] | null): ConnectError {
  const { code, message, details } = error.status;
  return new ConnectError(message, code, headers === null ? undefined : [...headers], details, error);
}
