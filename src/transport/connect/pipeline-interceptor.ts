import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextKey } from "@connectrpc/connect";
import type { Interceptor, StreamResponse, UnaryResponse } from "@connectrpc/connect";
import type { Logger } from "pino";
import { toConnectError } from "../../errors/to-connect-error.js";
import { BEARER_CHALLENGE } from "../auth-challenge.js";
import { Call } from "../../pipeline/call.js";
import type { AddressSource, HeaderSource, Protocol } from "../../pipeline/call.js";
import { CallError, callErrorOf } from "../../pipeline/call-error.js";
import type { MethodTable } from "../../pipeline/method-table.js";
import { grpcContentTypeRegExp, grpcWebContentTypeRegExp } from "./connect-internals.js";
import { refusalOf } from "./connect-refusals.js";
import type { RefusalContext } from "./connect-refusals.js";

// The call of a Connect-served request, for the service implementations (connect-services.ts) and for the
// handler wrapper, which learns from it that the pipeline started.
export const callKey = createContextKey<Call | undefined>(undefined, { description: "the call pipeline's call" });

// Set by the REST adapter on the calls it sends through Connect in-process (CALL_PATH=connect), so that the
// pipeline knows them as REST calls.
export const viaRestKey = createContextKey<boolean>(false, { description: "a REST call sent through Connect" });

// The caller's socket, set by the Connect adapter (and for REST calls sent through Connect, by the REST adapter) so
// that the pipeline can read the caller's address.
export const addressKey = createContextKey<AddressSource | null>(null, { description: "the caller's socket" });

// When the request arrived, set by the handler wrapper before Connect reads the body: the caller's deadline counts
// from there, as Connect's own timer does; null for a call made in-process (REST through Connect), which starts now.
export const startedKey = createContextKey<number | null>(null, { description: "when the request arrived" });
// The authority a REST request sent through Connect in-process was sent to, as its caller wrote it (null: none, an
// HTTP/1.0 request without Host); undefined for every other call, whose authority is its URL's host.
export const authorityKey = createContextKey<string | null | undefined>(undefined, { description: "the REST request's authority" });

function protocolOf(contentType: string | null, viaRest: boolean): Protocol {
  if (viaRest) return "rest";
  if (contentType === null) return "connect";
  if (grpcWebContentTypeRegExp.test(contentType)) return "grpc-web";
  if (grpcContentTypeRegExp.test(contentType)) return "grpc";
  return "connect";
}

// Connect's interceptor as an adapter into the call pipeline: every call Connect serves (Connect and gRPC-web,
// streams, compressed messages, and everything when CALL_PATH=connect) runs through the same stages as the
// direct adapters', with Connect's continuation as the last step.
export function pipelineInterceptor(table: MethodTable, logger: Logger, maxMessageBytes: number): Interceptor {
  function asCallError(thrown: unknown, call: Call): CallError {
    if (thrown instanceof CallError) return thrown;
    // Thrown past the stages (a fault of a stage itself, or a server run without stages).
    const error = callErrorOf(thrown, call.entry.policy.domain, call.requestId, call.callerGone);
    if (error.internal) logger.error({ requestId: call.requestId, err: thrown }, "call failed outside the pipeline's error stage");
    return error;
  }

  return (next) => async (req) => {
    const entry = table.of(req.method);
    const protocol = protocolOf(req.header.get("content-type"), req.contextValues.get(viaRestKey));
    const request = req.stream ? create(req.method.input) : req.message;
    const address = req.contextValues.get(addressKey);
    const headers = new ConnectHeaders(req.header, req.url, req.contextValues.get(authorityKey));
    const call = new Call(entry, protocol, request, headers, null, null, address, req.signal, req.contextValues.get(startedKey));
    req.contextValues.set(callKey, call);
    // A stream's messages are read (and can fail to decode) while the handler runs: those are the caller's
    // mistakes, answered as the same request would be before the pipeline.
    if (req.stream) {
      const ctx = { domain: entry.policy.domain, headers: req.header, maxMessageBytes, requestId: call.requestId };
      req = { ...req, message: readRequests(req.message, ctx) };
    }
    try {
      // Connect's response carries the headers Connect set for its protocol; the stages' are added to them.
      const res = (await table.run(call, () => next(req))) as UnaryResponse | StreamResponse;
      for (const [name, value] of call.responseHeaders ?? []) res.header.append(name, value);
      return res.stream ? { ...res, message: mapStreamErrors(res.message, call, asCallError) } : res;
    } catch (thrown) {
      const error = toConnectError(asCallError(thrown, call), call.responseHeaders);
      // A unary Connect call's error is its HTTP status (401 for UNAUTHENTICATED), with its metadata as headers.
      if (protocol === "connect" && !req.stream && error.code === Code.Unauthenticated) error.metadata.set("www-authenticate", BEARER_CHALLENGE);
      throw error;
    }
  };
}

// Connect's request headers as the pipeline reads them. Connect drops HTTP/2's pseudo-headers; the authority the
// caller sent (which handlers read to write hrefs on the caller's host) is the host of the URL Connect made from it,
// or, for a REST call sent through Connect in-process, the REST request's own, as written (a URL would have
// normalised it: "a.test:80" was "a.test", and a port past 65535 an unlogged 500; a probe, 2026-11-28). A Fetch
// Headers object would throw on the name ":authority" itself.
class ConnectHeaders implements HeaderSource {
  constructor(
    private readonly header: Headers,
    private readonly url: string,
    private readonly restAuthority: string | null | undefined,
  ) {}

  get(name: string): string | null {
    if (name !== ":authority") return this.header.get(name);
    return this.restAuthority !== undefined ? this.restAuthority : new URL(this.url).host;
  }
}

async function* readRequests<T>(messages: AsyncIterable<T>, ctx: RefusalContext): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (thrown) {
    throw thrown instanceof ConnectError ? refusalOf(thrown, true, ctx) : thrown;
  }
}

// A streaming handler fails while its messages are read, after the pipeline has returned.
async function* mapStreamErrors<T>(messages: AsyncIterable<T>, call: Call, asCallError: (thrown: unknown, call: Call) => CallError): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (thrown) {
    throw toConnectError(asCallError(thrown, call), call.responseHeaders);
  }
}
