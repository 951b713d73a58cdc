import type { DescMessage, DescMethodUnary, DescService, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import type { Call } from "./call.js";

// A unary method's implementation, whatever protocol the call came on: the request message and the call (who
// is calling, the signal) in, the response out, synchronously when it can be.
export type UnaryHandler<I extends DescMessage = DescMessage, O extends DescMessage = DescMessage> = (
  request: MessageShape<I>,
  call: Call,
) => MessageInitShape<O> | Promise<MessageInitShape<O>>;

// The handlers of every method of a service, checked against its generated descriptor like Connect's
// ServiceImpl.
export type ServiceHandlers<S extends DescService> = {
  [K in keyof S["method"]]: S["method"][K] extends DescMethodUnary<infer I, infer O> ? UnaryHandler<I, O> : never;
};

// One service of ours with its handlers.
export interface ServedService {
  service: DescService;
  handlers: Record<string, UnaryHandler>;
}

export function servedService<S extends DescService>(service: S, handlers: ServiceHandlers<S>): ServedService {
  return { service, handlers: handlers as unknown as Record<string, UnaryHandler> };
}
