import type http from "node:http";
import type { JsonReadOptions, JsonWriteOptions } from "@bufbuild/protobuf";
import { Code, ConnectError, createConnectRouter, createContextValues } from "@connectrpc/connect";
import type { ConnectRouter, ConnectRouterOptions } from "@connectrpc/connect";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { Logger } from "pino";
import type { MethodTable } from "../../pipeline/method-table.js";
import { acceptedCompressions } from "../compression.js";
import type { NodeRequest, NodeResponse } from "../node-types.js";
import type { FairTurns } from "../fair-turns.js";
import type { BodyBudget } from "../limits/body-budget.js";
import type { UniversalHandler, UniversalServerRequest } from "./connect-internals.js";
import { wrapHandler } from "./handler-wrapper.js";
import { answerMethodNotAllowed } from "./method-not-allowed.js";
import { addressKey, pipelineInterceptor } from "./pipeline-interceptor.js";

export interface ConnectAdapterOptions extends Omit<ConnectRouterOptions, "interceptors"> {
  table: MethodTable;
  routes(router: ConnectRouter): void;
  jsonOptions: Partial<JsonReadOptions & JsonWriteOptions>;
  readMaxBytes: number;
  // Starts and ends of the calls Connect serves, within a time budget per turn.
  turns: FairTurns;
  // The server's budget of request bodies, which the bodies Connect reads count against (counted-body.ts).
  bodyBudget: BodyBudget;
  // Requests for paths no handler serves (REST, probes).
  fallback(req: NodeRequest, res: NodeResponse): void;
  logger: Logger;
}

export interface ConnectAdapter {
  // The Node request listener for every Connect-served call.
  handle(req: NodeRequest, res: NodeResponse): void;
  // The same wrapped handlers, for the REST adapter to call in-process when every call goes through Connect.
  handlers: UniversalHandler[];
}

// What connect-node's connectNodeAdapter does (route by path, convert the Node request and response), with the
// pipeline interceptor on every call and each of the router's handlers wrapped by wrapHandler.
export function createConnectAdapter(options: ConnectAdapterOptions): ConnectAdapter {
  loadFetchGlobals();
  const { routes, fallback, logger, table, turns, bodyBudget, ...routerOptions } = options;
  const router = createConnectRouter({
    acceptCompression: acceptedCompressions,
    // Compressed requests are read, but no answer is compressed: connect-node compressed every answer of 1 KiB or
    // more to callers that accept gzip (grpc-js and grpcio announce it by default), which the direct gRPC adapter
    // does not, so the two call paths differed on the wire (a probe, 2026-11-28). Not compressing is the better
    // half: a Decrypt's answer carries plaintext, and compressing it beside what a caller chose (its AAD, its
    // request id) would let the answer's length tell about it (as BREACH does); ciphertext does not compress.
    compressMinBytes: Number.MAX_SAFE_INTEGER,
    ...routerOptions,
    interceptors: [pipelineInterceptor(table, logger, options.readMaxBytes)],
  });
  routes(router);
  const settings = { table, jsonOptions: options.jsonOptions, maxMessageBytes: options.readMaxBytes, logger, turns, bodyBudget };
  const handlers = router.handlers.map((h) => wrapHandler(h, settings));
  const byPath = new Map(handlers.map((h) => [h.requestPath, h]));

  function handle(req: NodeRequest, res: NodeResponse): void {
    const url = req.url ?? "";
    const q = url.indexOf("?");
    const handler = byPath.get(q < 0 ? url : url.slice(0, q));
    if (handler === undefined) {
      fallback(req, res);
      return;
    }
    if (!handler.allowedMethods.includes(req.method ?? "")) {
      answerMethodNotAllowed(req, res, table.of(handler.method).policy.domain, handler.allowedMethods);
      return;
    }
    // Started, and ended when its peer leaves, within a time budget per turn (fair-turns.ts).
    turns.run(() => serve(handler, req, res));
  }

  function serve(handler: UniversalHandler, req: NodeRequest, res: NodeResponse): void {
    // Gone while it waited for its turn: nobody is left to answer.
    if (res.destroyed) return;
    let uReq: UniversalServerRequest;
    try {
      const contextValues = createContextValues();
      contextValues.set(addressKey, req.socket);
      uReq = universalRequestFromNodeRequest(req, res, undefined, contextValues);
    } catch (err) {
      // A request Node let through without an authority; this may run in a later turn, outside the server's
      // request listener, so it is dropped here.
      logger.warn({ err }, "dropped a call Connect could not read");
      res.destroy();
      return;
    }
    // The body's failure reaches connect-node fairly too, through the counted body (counted-body.ts).
    handler({ ...uReq, body: bodyOf(req, uReq), signal: fairSignal(uReq.signal, turns) })
      .then(async (uRes) => {
        // The peer left while the call ran: nothing is written (each write to a gone response makes an error), and
        // the answer's iterator is closed so that connect-node's cleanup in it runs.
        if (res.destroyed) await uRes.body?.[Symbol.asyncIterator]().return?.();
        else await universalResponseToNodeResponse(uRes, res);
      })
      .catch((reason: unknown) => {
        // Aborted, or the response could not be written: the client went away, nothing is left to answer.
        if (ConnectError.from(reason).code === Code.Aborted || res.destroyed) return;
        logger.error({ err: reason, method: handler.method.name }, "a call failed outside its handler");
        res.destroy();
      });
  }
  return { handle, handlers };
}

// Node defines the fetch globals (Headers among them) lazily: the first use compiles Node's bundled undici and the
// web streams it needs, 36-55 ms on this machine's CPUs, all on the event loop. connect-node makes a Headers of
// every request it reads, so the first call a new server served through Connect (Connect, gRPC-web, or any gRPC
// method but the fast ones) held every other caller up that long: the slowest /healthz of a hostile test was
// that call (docs/robustness.md). Paid here instead, while the server starts.
function loadFetchGlobals(): void {
  new Headers();
}

// The request's body as connect-node reads it, but for HTTP/1.1 without destroying the request when Connect stops
// reading partway (an envelope declaring more than the limit is refused after its first bytes), which is what the
// async iterator of a Node stream does by default. A destroyed request that had not arrived whole kept its socket
// stopped, and the next request on the keep-alive connection went unanswered until the request timeout; left
// alive, the rest of its body is read and dropped once the answer is out (unread-body.ts). HTTP/2 resets such a
// stream instead.
function bodyOf(req: NodeRequest, uReq: UniversalServerRequest): UniversalServerRequest["body"] {
  if (req.httpVersionMajor !== 1) return uReq.body;
  return (req as http.IncomingMessage).iterator({ destroyOnReturn: false }) as AsyncIterable<Uint8Array>;
}

// The request's signal, aborted in a turn with room for it: a dropped connection aborts all its calls at once,
// and each one's teardown in connect-node costs about as much as its start.
function fairSignal(signal: AbortSignal, turns: FairTurns): AbortSignal {
  const fair = new AbortController();
  signal.addEventListener("abort", () => turns.run(() => fair.abort(signal.reason as unknown)), { once: true });
  return fair.signal;
}
