import type { HandlerContext } from "@connectrpc/connect";
import type { ServedService } from "../../pipeline/handlers.js";
import { callKey } from "./pipeline-interceptor.js";

type ConnectUnaryImpl = (request: unknown, context: HandlerContext) => unknown;

// A service of ours as Connect's router takes it: each method calls the same handler the direct adapters call,
// with the call the pipeline interceptor made.
export function connectImplOf({ service, handlers }: ServedService): Record<string, ConnectUnaryImpl> {
  const impl: Record<string, ConnectUnaryImpl> = {};
  for (const method of service.methods) {
    const handler = handlers[method.localName]!;
    impl[method.localName] = (request, context) => {
      const call = context.values.get(callKey);
      // The interceptor is registered with the router that serves this implementation, so this cannot happen.
      if (call === undefined) throw new Error(`${service.typeName}.${method.name} was called without the pipeline interceptor`);
      return handler(request as never, call);
    };
  }
  return impl;
}
