import type { JsonReadOptions, JsonWriteOptions } from "@bufbuild/protobuf";
import { Code, ConnectError, createConnectRouter, createContextValues } from "@connectrpc/connect";
import type { ConnectRouter, ConnectRouterOptions } from "@connectrpc/connect";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { Logger } from "pino";
import type { MethodTable } from "../../pipeline/method-table.js";
import { acceptedCompressions } from "../compression.js";
import type { NodeRequest, NodeResponse } from "../node-types.js";
import type { UniversalHandler } from "./connect-internals.js";
import { wrapHandler } from "./handler-wrapper.js";
import { addressKey, pipelineInterceptor } from "./pipeline-interceptor.js";

export interface ConnectAdapterOptions extends Omit<ConnectRouterOptions, "interceptors"> {
  table: MethodTable;
  routes(router: ConnectRouter): void;
  jsonOptions: Partial<JsonReadOptions & JsonWriteOptions>;
  readMaxBytes: number;
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
  const { routes, fallback, logger, table, ...routerOptions } = options;
  const router = createConnectRouter({
    acceptCompression: acceptedCompressions,
    ...routerOptions,
    interceptors: [pipelineInterceptor(table, logger, options.readMaxBytes)],
  });
  routes(router);
  const settings = { table, jsonOptions: options.jsonOptions, maxMessageBytes: options.readMaxBytes, logger };
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
    const contextValues = createContextValues();
    contextValues.set(addressKey, req.socket);
    handler(universalRequestFromNodeRequest(req, res, undefined, contextValues))
      .then((uRes) => universalResponseToNodeResponse(uRes, res))
      .catch((reason: unknown) => {
        // Aborted, or the response could not be written: the client went away, nothing is left to answer.
        if (ConnectError.from(reason).code === Code.Aborted || res.destroyed) return;
        logger.error({ err: reason, method: handler.method.name }, "a call failed outside its handler");
        res.destroy();
      });
  }
  return { handle, handlers };
}
