import { Code, ConnectError } from "@connectrpc/connect";
import {
  createAsyncIterable,
  encodeEnvelope,
  grpcContentTypeJson,
  grpcContentTypeProto,
  grpcWebContentTypeJson,
  grpcWebContentTypeProto,
  parseGrpcContentType,
  parseGrpcWebContentType,
  setTrailerStatus,
  trailerFlag,
  trailerSerialize,
} from "./connect-internals.js";
import type { UniversalServerResponse } from "./connect-internals.js";

// Connect's gRPC and gRPC-web handlers answer every error with a status, except one whose status they fail to
// write: they reject instead, and the call ends with no status at all (an HTTP/2 stream reset, an HTTP/1.1 socket
// closed). Their setTrailerStatus percent-encodes the message with encodeURIComponent, which throws URIError on a
// lone surrogate; and a +json message that fails to parse at a character outside the BMP ("😀") gets one, since
// JSON.parse quotes the UTF-16 unit it stopped at and Connect passes that text on. The text is Connect's, not
// ours to change (toConnectError makes ours well-formed), and no caller would see it anyway: the handler wrapper
// replaces every error Connect raises with our own. So a call whose handler rejected gets the answer Connect
// would have written, a status-only response, here with an internal error that the wrapper then completes like
// any other (connect-refusals.ts: while the request was read, MALFORMED_BODY; after the pipeline started, INTERNAL,
// logged with this cause). Undefined for the other protocols, whose errors Connect writes as JSON.
export function unwrittenStatusResponse(contentType: string, cause: unknown): UniversalServerResponse | undefined {
  const web = parseGrpcWebContentType(contentType);
  const grpc = web === undefined ? parseGrpcContentType(contentType) : undefined;
  if (web === undefined && grpc === undefined) return undefined;
  const trailer = setTrailerStatus(new Headers(), new ConnectError("internal error", Code.Internal, undefined, undefined, cause));
  if (web !== undefined) {
    const header = new Headers({ "content-type": web.binary ? grpcWebContentTypeProto : grpcWebContentTypeJson });
    return { status: 200, header, body: createAsyncIterable([encodeEnvelope(trailerFlag, trailerSerialize(trailer))]) };
  }
  const header = new Headers({ "content-type": grpc?.binary === true ? grpcContentTypeProto : grpcContentTypeJson });
  return { status: 200, header, trailer, body: createAsyncIterable([]) };
}
