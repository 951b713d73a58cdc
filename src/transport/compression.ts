import { Code, ConnectError } from "@connectrpc/connect";
import type { Compression } from "./connect/connect-internals.js";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";

// The request compressions the server accepts: connect-node's gzip and brotli, except that data which does not
// decompress is the caller's mistake. connect-node calls a truncated stream (zlib's Z_BUF_ERROR) and any zlib
// error it does not list INTERNAL, which told callers the server had failed; here every such failure is
// INVALID_ARGUMENT, and only the size limit keeps its RESOURCE_EXHAUSTED.
function callerFaultOnFailure(compression: Compression): Compression {
  return {
    name: compression.name,
    compress: (bytes) => compression.compress(bytes),
    decompress: (bytes, readMaxBytes) =>
      compression.decompress(bytes, readMaxBytes).catch((reason: unknown) => {
        const error = ConnectError.from(reason);
        if (error.code === Code.ResourceExhausted || error.code === Code.InvalidArgument) throw error;
        throw new ConnectError(`the ${compression.name} data of the request does not decompress`, Code.InvalidArgument, undefined, undefined, reason);
      }),
  };
}

export const acceptedCompressions: Compression[] = [callerFaultOnFailure(compressionGzip), callerFaultOnFailure(compressionBrotli)];
