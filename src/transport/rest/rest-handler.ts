import type { DescService, JsonValue, Message } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { createUniversalHandlerClient } from "@connectrpc/connect/protocol";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { createTransport } from "@connectrpc/connect/protocol-connect";
import type { Transport } from "@connectrpc/connect";
import { domainErrorToConnectError, toConnectError } from "../../errors/to-connect-error.js";
import { requestIdOf } from "../call-outcome.js";
import type { NodeRequest, NodeResponse } from "../node-types.js";
import { ClientGoneError, readBody } from "./body-reader.js";
import { forwardRequestHeaders, responseHeadersOf } from "./http-headers.js";
import { toRestJson } from "./json-any.js";
import { buildRequestMessage } from "./request-builder.js";
import { methodNotAllowed, routeNotFound } from "./rest-errors.js";
import { RouteTable } from "./route-table.js";
import type { RestRoute } from "./route-table.js";
import { connectErrorToStatusJson, httpStatusOfError, retryAfterSeconds } from "./status-json.js";

// The types Connect's Node adapter hands to its fallback: HTTP/1.1 or HTTP/2 (compat API).
export type RestHandler = (req: NodeRequest, res: NodeResponse) => Promise<void>;

export interface RestHandlerOptions {
  // Every service registered on the Connect router; methods with a google.api.http annotation get routes.
  services: readonly DescService[];
  // router.handlers of that ConnectRouter: calls go through them, so every interceptor runs as for gRPC.
  handlers: UniversalHandler[];
  maxBodyBytes: number;
  // Faults of the REST layer itself (a bug, never a caller's mistake); the caller only sees the request id.
  onInternalError?: (error: unknown, requestId: string) => void;
}

type Outcome = { status: number; headers: Map<string, string[]>; body: JsonValue };

// The REST/JSON surface: routes from the annotations, the request message from path, query and body, the call
// in-process through the Connect router, and the answer as proto-JSON (Any as typeUrl/value) or a google.rpc.Status.
export function createRestHandler(opts: RestHandlerOptions): RestHandler {
  const table = new RouteTable(opts.services);
  const transport = createTransport({
    httpClient: createUniversalHandlerClient(opts.handlers),
    baseUrl: "http://in-process",
    useBinaryFormat: true,
    interceptors: [],
    acceptCompression: [],
    sendCompression: null,
    compressMinBytes: Number.MAX_SAFE_INTEGER,
    readMaxBytes: 0xffffffff,
    writeMaxBytes: 0xffffffff,
  });
  const onInternalError =
    opts.onInternalError ?? ((error, requestId) => console.error(`REST request ${requestId} failed`, error));

  return async (req, res) => {
    // The same id the in-process call gets (it is forwarded as the x-request-id header), so the answer carries it
    // whether the REST layer or the service refused the request.
    const given = req.headers["x-request-id"];
    const requestId = requestIdOf(Array.isArray(given) ? given[0] : given);
    const abort = new AbortController();
    const onClose = (): void => {
      if (!res.writableFinished) abort.abort();
    };
    res.once("close", onClose);
    try {
      const outcome = await serve(req, requestId, table, transport, opts.maxBodyBytes, abort.signal);
      if (!abort.signal.aborted) write(req, res, requestId, outcome);
    } catch (thrown) {
      if (abort.signal.aborted || thrown instanceof ClientGoneError) return;
      const { error, internal } = toConnectError(thrown, requestId);
      if (internal) onInternalError(thrown, requestId);
      try {
        write(req, res, requestId, errorOutcome(error, new Map()));
      } catch (writeError) {
        onInternalError(writeError, requestId);
        res.destroy();
      }
    } finally {
      res.off("close", onClose);
    }
  };
}

async function serve(
  req: NodeRequest,
  requestId: string,
  table: RouteTable,
  transport: Transport,
  maxBodyBytes: number,
  signal: AbortSignal,
): Promise<Outcome> {
  const httpMethod = (req.method ?? "GET").toUpperCase();
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const path = q < 0 ? url : url.slice(0, q);
  const found = path.startsWith("/") ? table.lookup(httpMethod, path) : undefined;
  if (found === undefined || found.kind === "not_found") throw routeNotFound(httpMethod, path);
  if (found.kind === "method_not_allowed") {
    const error = domainErrorToConnectError(methodNotAllowed(httpMethod, path, found.allow));
    return errorOutcome(error, new Map([["allow", [found.allow.join(", ")]]]));
  }
  const { route, pathValues } = found;
  const body = await readBody(req, maxBodyBytes);
  const message = buildRequestMessage({
    route,
    pathValues,
    query: new URLSearchParams(q < 0 ? "" : url.slice(q + 1)),
    body,
    contentType: req.headers["content-type"],
    contentEncoding: req.headers["content-encoding"],
  });
  const header = forwardRequestHeaders(req.headers);
  header.set("x-request-id", requestId);
  return call(route, transport, message, header, signal);
}

async function call(
  route: RestRoute,
  transport: Transport,
  message: Message,
  header: Headers,
  signal: AbortSignal,
): Promise<Outcome> {
  let res: Awaited<ReturnType<typeof transport.unary>>;
  try {
    res = await transport.unary(route.method, signal, undefined, header, message);
  } catch (thrown) {
    // Errors of the call come back already mapped by the server's interceptors; they pass through unchanged.
    const error = ConnectError.from(thrown);
    return errorOutcome(error, responseHeadersOf(error.metadata));
  }
  // Outside the try: a failure to render the answer is our fault, logged with a request id by the caller.
  const body = toRestJson(route.method.output, res.message);
  return { status: 200, headers: responseHeadersOf(res.header, res.trailer), body };
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
