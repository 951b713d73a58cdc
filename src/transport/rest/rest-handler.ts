import type { JsonValue, Message } from "@bufbuild/protobuf";
import { ConnectError, createContextValues } from "@connectrpc/connect";
import type { Transport } from "@connectrpc/connect";
import type { Logger } from "pino";
import { methodNotAllowed } from "../../errors/protocol-errors.js";
import type { ErrorDomain } from "../../errors/reasons.js";
import { statusPartsOf } from "../../errors/status-details.js";
import { toConnectError } from "../../errors/to-connect-error.js";
import { Call, requestIdOf } from "../../pipeline/call.js";
import { CallError, callErrorOf } from "../../pipeline/call-error.js";
import { createTransport, createUniversalHandlerClient } from "../connect/connect-internals.js";
import type { UniversalHandler } from "../connect/connect-internals.js";
import { addressKey, authorityKey, startedKey, viaRestKey } from "../connect/pipeline-interceptor.js";
import { NodeHeaders } from "../header-source.js";
import type { NodeRequest, NodeResponse } from "../node-types.js";
import type { BodyBudget } from "../limits/body-budget.js";
import { ClientGoneError, readBody } from "./body-reader.js";
import { BEARER_CHALLENGE } from "../auth-challenge.js";
import { forwardRequestHeaders, responseHeadersOf } from "./http-headers.js";
import { refuseMalformedEscapes } from "./query-params.js";
import { requestAuthority } from "./request-target.js";
import { resultToRestJson, toRestJson } from "./json-any.js";
import { buildRequestMessage } from "./request-builder.js";
import { BadRequest, LimitsExceeded, routeNotFound } from "./rest-errors.js";
import type { RestRoute, RouteLookup, RouteTable } from "./route-table.js";
import { connectErrorToStatusJson, httpStatusOfError, retryAfterSeconds } from "./status-json.js";

export type RestHandler = (req: NodeRequest, res: NodeResponse) => Promise<void>;

export interface RestHandlerOptions {
  routes: RouteTable;
  maxBodyBytes: number;
  bodyBudget: BodyBudget;
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
    // The call's deadline counts from here, the request's headers, not from the end of its body (docs/pipeline.md).
    const started = performance.now();
    const given = req.headers["x-request-id"];
    const requestId = requestIdOf(Array.isArray(given) ? given[0] : given);
    let domain: ErrorDomain = "cloudplane";
    try {
      const found = findRoute(req, opts.routes);
      let outcome: Outcome | Promise<Outcome>;
      if ("status" in found) {
        outcome = found;
      } else {
        domain = found.route.entry.policy.domain;
        const body = await readBody(req, opts.maxBodyBytes, domain, opts.bodyBudget);
        outcome = invoke(found.route, readMessage(req, found, body), req, res, requestId, started);
        if (outcome instanceof Promise) outcome = await outcome;
      }
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

type FoundRoute = Extract<RouteLookup, { kind: "found" }>;

// The route of the request, or the answer when there is none. Synchronous, like everything but reading the body:
// each async step is a promise and microtask turns more per call.
function findRoute(req: NodeRequest, routes: RouteTable): FoundRoute | Outcome {
  const httpMethod = (req.method ?? "GET").toUpperCase();
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const path = q < 0 ? url : url.slice(0, q);
  const found = path.startsWith("/") ? routes.lookup(httpMethod, path) : undefined;
  if (found === undefined || found.kind === "not_found") throw routeNotFound(httpMethod, path);
  if (found.kind === "method_not_allowed") {
    const domain = found.entry.policy.domain;
    const error = new CallError(statusPartsOf(methodNotAllowed(domain, httpMethod, path, found.allow)), false);
    return errorOutcome(toConnectError(error, null), new Map([["allow", [found.allow.join(", ")]]]));
  }
  return found;
}

// The request message from the path, the query string and the body.
function readMessage(req: NodeRequest, found: FoundRoute, body: Uint8Array): Message {
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  if (q >= 0) refuseMalformedEscapes(url.slice(q + 1));
  return buildRequestMessage({
    route: found.route,
    pathValues: found.pathValues,
    query: q < 0 ? null : new URLSearchParams(url.slice(q + 1)),
    body,
    contentType: req.headers["content-type"],
    contentEncoding: req.headers["content-encoding"],
    origin: req.headers.origin,
  });
}

type Invoke = (route: RestRoute, message: Message, req: NodeRequest, res: NodeResponse, requestId: string, started: number) => Outcome | Promise<Outcome>;

// Straight into the pipeline; synchronous when the call is (a cache-hit Encrypt), which spares the microtask
// turns of awaiting a value.
const invokeDirect: Invoke = (route, message, req, res, requestId, started) => {
  const call = new Call(route.entry, "rest", message, new NodeHeaders(req.headers), requestId, res, req.socket, null, started);
  let response: unknown;
  try {
    response = route.entry.invoke!(call);
  } catch (thrown) {
    return failed(call, thrown);
  }
  if (response instanceof Promise) {
    return response.then(
      (value: unknown) => succeeded(route, call, value),
      (thrown: unknown) => failed(call, thrown),
    );
  }
  return succeeded(route, call, response);
};

// A failure to render the answer is our fault: it throws, to be logged with the request id by the caller.
function succeeded(route: RestRoute, call: Call, response: unknown): Outcome {
  const output = route.method.output;
  return { status: 200, headers: restHeaders(call.responseHeaders), body: resultToRestJson(output, response) };
}

function failed(call: Call, thrown: unknown): Outcome {
  // CallError from the stages; anything else escaped them (a server run without stages) and is mapped here.
  const error = thrown instanceof CallError ? thrown : callErrorOf(thrown, call.entry.policy.domain, call.requestId);
  if (error !== thrown && error.internal) throw thrown;
  return errorOutcome(toConnectError(error, null), restHeaders(call.responseHeaders));
}

function restHeaders(headers: readonly [string, string][] | null): Map<string, string[]> {
  const out = new Map<string, string[]>();
  if (headers === null) return out;
  for (const [name, value] of headers) {
    const values = out.get(name);
    if (values === undefined) out.set(name, [value]);
    else values.push(value);
  }
  return out;
}

// Carry the REST caller's address and the request's arrival to the in-process Connect call, and only there: the
// marked handlers below serve nothing but the REST adapter's own calls, and take these headers off before Connect
// sees them (a caller's own are overwritten).
const PEER_ADDRESS_HEADER = "x-cloudplane-peer-address";
// The authority the REST request was sent to, absent when it had none, which the pipeline reads as the call's
// `:authority` (authorityKey): Connect's calls are made to "http://in-process", and the vApp methods, which write
// hrefs on the caller's host, wrote "https://in-process/api/..." and refused the caller's own hrefs (a probe,
// 2026-11-28).
const AUTHORITY_HEADER = "x-cloudplane-authority";
const STARTED_HEADER = "x-cloudplane-started";

// Through Connect's handlers in-process: the request re-encoded as Connect binary, the pipeline run by Connect's
// interceptor, the answer decoded again.
function connectInvoker(handlers: UniversalHandler[]): Invoke {
  // Marks each call as REST for the pipeline (the interceptor reads it from the call's context values).
  const marked = handlers.map((h) =>
    Object.assign((req: Parameters<UniversalHandler>[0]) => {
      const contextValues = (req.contextValues ??= createContextValues());
      contextValues.set(viaRestKey, true);
      contextValues.set(addressKey, { remoteAddress: req.header.get(PEER_ADDRESS_HEADER) ?? undefined });
      contextValues.set(startedKey, Number(req.header.get(STARTED_HEADER)));
      contextValues.set(authorityKey, req.header.get(AUTHORITY_HEADER));
      req.header.delete(PEER_ADDRESS_HEADER);
      req.header.delete(STARTED_HEADER);
      req.header.delete(AUTHORITY_HEADER);
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
  return async (route, message, req, res, requestId, started) => {
    const abort = new AbortController();
    const onClose = (): void => {
      if (!res.writableFinished) abort.abort();
    };
    res.once("close", onClose);
    const header = forwardRequestHeaders(req.headers);
    header.set("x-request-id", requestId);
    header.set(PEER_ADDRESS_HEADER, req.socket.remoteAddress ?? "unknown");
    header.set(STARTED_HEADER, String(started));
    const authority = requestAuthority(req.headers);
    if (authority !== undefined) header.set(AUTHORITY_HEADER, authority);
    else header.delete(AUTHORITY_HEADER);
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
  const status = httpStatusOfError(error);
  if (status === 401 && !headers.has("www-authenticate")) headers.set("www-authenticate", [BEARER_CHALLENGE]);
  return { status, headers, body: connectErrorToStatusJson(error) };
}

// The members of both response classes that writing one JSON answer needs.
interface ResponseSink {
  statusCode: number;
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  setHeader(name: string, value: string | string[]): unknown;
  end(body: string): unknown;
  end(): unknown;
}

function write(req: NodeRequest, res: ResponseSink, requestId: string, outcome: Outcome): void {
  if (res.headersSent || res.destroyed) return;
  res.statusCode = outcome.status;
  // The request id is the call's own, where the pipeline's stage put it or else last: one setHeader for it.
  let withId = false;
  for (const [name, values] of outcome.headers) {
    if (name === "x-request-id") {
      res.setHeader(name, requestId);
      withId = true;
    } else {
      res.setHeader(name, values.length === 1 ? (values[0] ?? "") : values);
    }
  }
  res.setHeader("content-type", "application/json");
  if (!withId) res.setHeader("x-request-id", requestId);
  // An HTTP/1.1 body left unread (too large, or the route was not found) must not be parsed as the next request
  // on this connection; HTTP/2 streams need no such care.
  if (req.httpVersionMajor === 1 && !req.complete) res.setHeader("connection", "close");
  const json = JSON.stringify(outcome.body);
  if (req.method !== "HEAD") {
    res.end(json);
    return;
  }
  // HEAD: the GET's status and headers, with the length of the body a GET would get, and no body (RFC 9110 9.3.2).
  res.setHeader("content-length", String(Buffer.byteLength(json)));
  res.end();
}
