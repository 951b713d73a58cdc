import { Code, ConnectError } from "@connectrpc/connect";
import type { Compression } from "./connect/connect-internals.js";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";

// The request compressions the server accepts: connect-node's gzip and brotli, except that data which does not
// decompress is the caller's mistake. connect-node calls a truncated stream (zlib's Z_BUF_ERROR) and any zlib
// error it does not list INTERNAL, which told callers the server had failed; here every such failure is
// INVALID_ARGUMENT, and only the size limit keeps its RESOURCE_EXHAUSTED.
//
// And a compressed request may expand to MAX_EXPANSION times its size, or EXPANSION_FLOOR_BYTES whatever its size,
// not to the 4 MiB of any request: connect-node decompresses, counts and decodes the whole message before the call's
// pipeline authenticates it, so 35 bytes of brotli cost the server what 4 MiB do (60-95 ms of CPU each, for anyone
// without credentials; a probe, 2026-11-28). The floor leaves every real request of this API alone (an Encrypt of
// 64 KiB of zeros with 64 KiB of AAD is about 175 KB of JSON, compressed a few hundred bytes); a larger one sent
// compressed must be at least a 64th of its size. The decompression stops at the bound.
export const MAX_EXPANSION = 64;
export const EXPANSION_FLOOR_BYTES = 256 * 1024;

// The bound a compressed request was held to, carried to the refusal (connect-refusals.ts).
export class ExpansionRefused {
  constructor(
    readonly compressedBytes: number,
    readonly allowedBytes: number,
  ) {}
}

function boundedAndCallerFaultOnFailure(compression: Compression): Compression {
  return {
    name: compression.name,
    compress: (bytes) => compression.compress(bytes),
    decompress: (bytes, readMaxBytes) => {
      const allowed = Math.min(readMaxBytes, Math.max(EXPANSION_FLOOR_BYTES, bytes.byteLength * MAX_EXPANSION));
      return compression.decompress(bytes, allowed).catch((reason: unknown) => {
        const error = ConnectError.from(reason);
        if (error.code === Code.ResourceExhausted && allowed < readMaxBytes) {
          throw new ConnectError(error.rawMessage, Code.ResourceExhausted, undefined, undefined, new ExpansionRefused(bytes.byteLength, allowed));
        }
        if (error.code === Code.ResourceExhausted || error.code === Code.InvalidArgument) throw error;
        throw new ConnectError(`the ${compression.name} data of the request does not decompress`, Code.InvalidArgument, undefined, undefined, reason);
      });
    },
  };
}

export const acceptedCompressions: Compression[] = [boundedAndCallerFaultOnFailure(compressionGzip), boundedAndCallerFaultOnFailure(compressionBrotli)];
