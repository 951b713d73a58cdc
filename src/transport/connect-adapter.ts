import type { JsonReadOptions, JsonWriteOptions } from "@bufbuild/protobuf";
import { Code, ConnectError, createConnectRouter } from "@connectrpc/connect";
import type { ConnectRouter, ConnectRouterOptions } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { Logger } from "pino";
import type { NodeRequest, NodeResponse } from "./node-types.js";
import { acceptedCompressions } from "./compression.js";
import { wrapHandler } from "./handler-wrapper.js";

export interface ConnectAdapterOptions extends ConnectRouterOptions {
  routes(router: ConnectRouter): void;
  jsonOptions: Partial<JsonReadOptions & JsonWriteOptions>;
  // Requests for paths no handler serves (REST, probes).
  fallback(req: NodeRequest, res: NodeResponse): void;
  logger: Logger;
}

export interface ConnectAdapter {
  // The Node request listener for every Connect-served call.
  handle(req: NodeRequest, res: NodeResponse): void;
  // The same wrapped handlers, for the REST layer to call in-process.
  handlers: UniversalHandler[];
}

// What connect-node's connectNodeAdapter does (route by path, convert the Node request and response), with each
// of the router's handlers wrapped by wrapHandler, so that request ids and complete errors hold for every
// call, including the REST calls that go through the same handlers.
export function createConnectAdapter(options: ConnectAdapterOptions): ConnectAdapter {
  const { routes, fallback, logger, ...routerOptions } = options;
  const router = createConnectRouter({ acceptCompression: acceptedCompressions, ...routerOptions });
  routes(router);
  const handlers = router.handlers.map((h) => wrapHandler(h, options.jsonOptions));
  const byPath = new Map(handlers.map((h) => [h.requestPath, h]));

  function handle(req: NodeRequest, res: NodeResponse): void {
    const handler = byPath.get((req.url ?? "").split("?", 1)[0] ?? "");
    if (handler === undefined) {
      fallback(req, res);
      return;
    }
    handler(universalRequestFromNodeRequest(req, res, undefined, undefined))
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
