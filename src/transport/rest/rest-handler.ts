import { create } from "@bufbuild/protobuf";
import type { JsonValue, Message } from "@bufbuild/protobuf";
import { ConnectError, createContextValues } from "@connectrpc/connect";
import type { Transport } from "@connectrpc/connect";
import type { Logger } from "pino";
import type { ErrorDomain } from "../../errors/reasons.js";
import { statusPartsOf } from "../../errors/status-details.js";
import { toConnectError } from "../../errors/to-connect-error.js";
import { Call, requestIdOf } from "../../pipeline/call.js";
import { CallError, callErrorOf } from "../../pipeline/call-error.js";
import { createTransport, createUniversalHandlerClient } from "../connect/connect-internals.js";
import type { UniversalHandler } from "../connect/connect-internals.js";
import { viaRestKey } from "../connect/pipeline-interceptor.js";
import { NodeHeaders } from "../header-source.js";
import type { NodeRequest, NodeResponse } from "../node-types.js";
import { ClientGoneError, readBody } from "./body-reader.js";
import { forwardRequestHeaders, responseHeadersOf } from "./http-headers.js";
import { toRestJson } from "./json-any.js";
import { buildRequestMessage } from "./request-builder.js";
import { BadRequest, LimitsExceeded, methodNotAllowed, routeNotFound } from "./rest-errors.js";
import type { RouteTable } from "./route-table.js";
import type { RestRoute } from "./route-table.js";
import { connectErrorToStatusJson, httpStatusOfError, retryAfterSeconds } from "./status-json.js";

export type RestHandler = (req: NodeRequest, res: NodeResponse) => Promise<void>;

export interface RestHandlerOptions {
  routes: RouteTable;
  maxBodyBytes: number;
  logger: Logger;
  // When set (CALL_PATH=connect), calls go through these Connect handlers in-process instead of straight into
  // the pipeline: the reference path the direct one is checked against.
  viaConnect: UniversalHandler[] | null;
}

type Outcome = { status: number; headers: Map<string, string[]>; body: JsonValue };

// The REST/JSON surface: routes from the annotations, the request message from path, query and body, the call
// through the pipeline, and the answer as proto-JSON (Any as typeUrl/value) or a google.rpc.Status.
export function createRestHandler(opts: RestHandlerOptions): RestHandler {
  const invoke = opts.viaConnect === null ? invokeDirect : connectInvoker(opts.viaConnect);

  return async (req, res) => {
    const given = req.headers["x-request-id"];
    const requestId = requestIdOf(Array.isArray(given) ? given[0] : given);
    let domain: ErrorDomain = "cloudplane";
    try {
      const found = await readRequest(req, opts, (d) => (domain = d));
      const outcome = "status" in found ? found : await invoke(found.route, found.message, req, res, requestId);
      write(req, res, requestId, outcome);
    } catch (thrown) {
      if (thrown instanceof ClientGoneError || res.destroyed) return;
      const error = thrown instanceof BadRequest || thrown instanceof LimitsExceeded ? thrown.toDomainError(domain) : thrown;
      const callError = callErrorOf(error, domain, requestId);
      if (callError.internal) opts.logger.error({ requestId, err: thrown }, "REST request failed with an internal error");
      try {
        write(req, res, requestId, errorOutcome(toConnectError(callError, null), new Map()));
      } catch (writeError) {
        opts.logger.error({ requestId, err: writeError }, "REST error response could not be written");
        res.destroy();
      }
    }
  };
}

type ReadRequest = { route: RestRoute; message: Message } | Outcome;

// The route and the request message, or the answer when there is no route for the request.
async function readRequest(req: NodeRequest, opts: RestHandlerOptions, setDomain: (d: ErrorDomain) => void): Promise<ReadRequest> {
  const httpMethod = (req.method ?? "GET").toUpperCase();
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const path = q < 0 ? url : url.slice(0, q);
  const found = path.startsWith("/") ? opts.routes.lookup(httpMethod, path) : undefined;
  if (found === undefined || found.kind === "not_found") throw routeNotFound(httpMethod, path);
  if (found.kind === "method_not_allowed") {
    const domain = found.entry.policy.domain;
    const error = new CallError(statusPartsOf(methodNotAllowed(domain, httpMethod, path, found.allow)), false);
    return errorOutcome(toConnectError(error, null), new Map([["allow", [found.allow.join(", ")]]]));
  }
  const { route, pathValues } = found;
  const domain = route.entry.policy.domain;
  setDomain(domain);
  const body = await readBody(req, opts.maxBodyBytes, domain);
  const message = buildRequestMessage({
    route,
    pathValues,
    query: new URLSearchParams(q < 0 ? "" : url.slice(q + 1)),
    body,
    contentType: req.headers["content-type"],
    contentEncoding: req.headers["content-encoding"],
  });
  return { route, message };
}

type Invoke = (route: RestRoute, message: Message, req: NodeRequest, res: NodeResponse, requestId: string) => Promise<Outcome>;

// Straight into the pipeline.
const invokeDirect: Invoke = async (route, message, req, res, requestId) => {
  const call = new Call(route.entry, "rest", message, new NodeHeaders(req.headers), requestId, res);
  let response: unknown;
  try {
    response = await route.entry.invoke!(call);
  } catch (thrown) {
    // CallError from the stages; anything else escaped them (a server run without stages) and is mapped here.
    const error = thrown instanceof CallError ? thrown : callErrorOf(thrown, route.entry.policy.domain, call.requestId);
    if (error !== thrown && error.internal) throw thrown;
    return errorOutcome(toConnectError(error, null), restHeaders(call.responseHeaders));
  }
  // Outside the try: a failure to render the answer is our fault, logged with the request id by the caller.
  const output = route.method.output;
  return { status: 200, headers: restHeaders(call.responseHeaders), body: toRestJson(output, create(output, response as never)) };
};

function restHeaders(headers: readonly [string, string][] | null): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [name, value] of headers ?? []) out.set(name, [...(out.get(name) ?? []), value]);
  return out;
}

// Through Connect's handlers in-process: the request re-encoded as Connect binary, the pipeline run by Connect's
// interceptor, the answer decoded again.
function connectInvoker(handlers: UniversalHandler[]): Invoke {
  // Marks each call as REST for the pipeline (the interceptor reads it from the call's context values).
  const marked = handlers.map((h) =>
    Object.assign((req: Parameters<UniversalHandler>[0]) => {
      (req.contextValues ??= createContextValues()).set(viaRestKey, true);
      return h(req);
    }, h),
  );
  const transport: Transport = createTransport({
    httpClient: createUniversalHandlerClient(marked),
    baseUrl: "http://in-process",
    useBinaryFormat: true,
    interceptors: [],
    acceptCompression: [],
    sendCompression: null,
    compressMinBytes: Number.MAX_SAFE_INTEGER,
    readMaxBytes: 0xffffffff,
    writeMaxBytes: 0xffffffff,
  });
  return async (route, message, req, res, requestId) => {
    const abort = new AbortController();
    const onClose = (): void => {
      if (!res.writableFinished) abort.abort();
    };
    res.once("close", onClose);
    const header = forwardRequestHeaders(req.headers);
    header.set("x-request-id", requestId);
    try {
      const result = await transport.unary(route.method, abort.signal, undefined, header, message);
      return { status: 200, headers: responseHeadersOf(result.header, result.trailer), body: toRestJson(route.method.output, result.message) };
    } catch (thrown) {
      // Errors of the call come back already rendered by the pipeline; they pass through unchanged.
      const error = ConnectError.from(thrown);
      return errorOutcome(error, responseHeadersOf(error.metadata));
    } finally {
      res.off("close", onClose);
    }
  };
}

function errorOutcome(error: ConnectError, headers: Map<string, string[]>): Outcome {
  const retryAfter = retryAfterSeconds(error);
  if (retryAfter !== undefined && !headers.has("retry-after")) headers.set("retry-after", [String(retryAfter)]);
  return { status: httpStatusOfError(error), headers, body: connectErrorToStatusJson(error) };
}

// The members of both response classes that writing one JSON answer needs.
interface ResponseSink {
  statusCode: number;
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  setHeader(name: string, value: string | string[]): unknown;
  end(body: string): unknown;
}

function write(req: NodeRequest, res: ResponseSink, requestId: string, outcome: Outcome): void {
  if (res.headersSent || res.destroyed) return;
  res.statusCode = outcome.status;
  for (const [name, values] of outcome.headers) res.setHeader(name, values.length === 1 ? (values[0] ?? "") : values);
  res.setHeader("content-type", "application/json");
  res.setHeader("x-request-id", requestId);
  // An HTTP/1.1 body left unread (too large, or the route was not found) must not be parsed as the next request
  // on this connection; HTTP/2 streams need no such care.
  if (req.httpVersionMajor === 1 && !req.complete) res.setHeader("connection", "close");
  res.end(JSON.stringify(outcome.body));
}
