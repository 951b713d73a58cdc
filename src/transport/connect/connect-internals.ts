// The one module that imports Connect's protocol internals: the "@connectrpc/connect/protocol*" entry points are
// marked @private (not covered by semver), so everything this server uses from them is named here, where an
// upgrade of the pinned @connectrpc/* versions is checked.
export { createAsyncIterable, createUniversalHandlerClient, encodeEnvelope, readAllBytes } from "@connectrpc/connect/protocol";
export type { Compression, UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
export {
  codeToHttpStatus,
  contentTypeUnaryRegExp,
  contentTypeUnaryJson,
  createTransport,
  errorFromJsonBytes,
  errorToJsonBytes,
  parseContentType as parseConnectContentType,
} from "@connectrpc/connect/protocol-connect";
export {
  contentTypeJson as grpcContentTypeJson,
  contentTypeProto as grpcContentTypeProto,
  contentTypeRegExp as grpcContentTypeRegExp,
  parseContentType as parseGrpcContentType,
  findTrailerError,
  setTrailerStatus,
} from "@connectrpc/connect/protocol-grpc";
export {
  contentTypeJson as grpcWebContentTypeJson,
  contentTypeProto as grpcWebContentTypeProto,
  contentTypeRegExp as grpcWebContentTypeRegExp,
  parseContentType as parseGrpcWebContentType,
  trailerFlag,
  trailerParse,
  trailerSerialize,
} from "@connectrpc/connect/protocol-grpc-web";
