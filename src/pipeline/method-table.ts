import type { DescMethod, DescService } from "@bufbuild/protobuf";
import type { Call } from "./call.js";
import type { ServedService, UnaryHandler } from "./handlers.js";
import { limitsOf } from "./message-limits.js";
import type { MessageLimits } from "./message-limits.js";
import { policyOf } from "./method-policy.js";
import type { MethodPolicy } from "./method-policy.js";
import { compose } from "./stage.js";
import type { Next, Outcome, Stage } from "./stage.js";

export interface MethodEntry {
  readonly method: DescMethod;
  // "/package.Service/Method", the path of gRPC, gRPC-web and Connect.
  readonly path: string;
  // "package.Service/Method", as logs and the audit trail name it (built once: every audited call names it).
  readonly name: string;
  readonly policy: MethodPolicy;
  // The bounds of its request message's repeated fields, which the adapters count before decoding a request.
  readonly limits: MessageLimits;
  // Null for the methods only Connect serves (streams, and the infrastructure services of routes.ts).
  readonly handler: UnaryHandler | null;
  // The whole pipeline with the handler as its last step, composed once; null where `handler` is.
  readonly invoke: Next | null;
}

function handled(call: Call, outcome: Outcome): Outcome {
  if (!(outcome instanceof Promise)) call.handlerReturned = true;
  return outcome;
}

// Every method the server serves, found by path or descriptor, each with its policy and the limits of its request
// read at start-up (which refuses a method without a policy, and a request with a repeated field without a bound)
// and its pipeline.
export class MethodTable {
  readonly #byPath = new Map<string, MethodEntry>();

  constructor(
    served: readonly ServedService[],
    connectServed: readonly DescService[],
    readonly stages: readonly Stage[],
  ) {
    for (const { service, handlers } of served) {
      for (const method of service.methods) {
        const handler = handlers[method.localName];
        if (handler === undefined) throw new Error(`${service.typeName}.${method.name} has no handler`);
        this.#add(method, handler);
      }
    }
    for (const service of connectServed) for (const method of service.methods) this.#add(method, null);
  }

  #add(method: DescMethod, handler: UnaryHandler | null): void {
    const path = `/${method.parent.typeName}/${method.name}`;
    if (this.#byPath.has(path)) throw new Error(`${path} is served twice`);
    const last = handler === null ? null : (call: Call): Outcome => handled(call, handler(call.request, call));
    const invoke = last === null ? null : compose(this.stages, last);
    this.#byPath.set(path, { method, path, name: path.slice(1), policy: policyOf(method), limits: limitsOf(method.input), handler, invoke });
  }

  byPath(path: string): MethodEntry | undefined {
    return this.#byPath.get(path);
  }

  // For adapters that know the descriptor (REST routes, Connect's interceptor).
  of(method: DescMethod): MethodEntry {
    const entry = this.#byPath.get(`/${method.parent.typeName}/${method.name}`);
    if (entry === undefined) throw new Error(`${method.parent.typeName}.${method.name} is not served`);
    return entry;
  }

  entries(): IterableIterator<MethodEntry> {
    return this.#byPath.values();
  }

  // Runs the stages around a final step given per call: Connect's own continuation of the calls it serves.
  // Composed per call, which costs a few closures; the direct adapters use `invoke`, composed once.
  run(call: Call, last: Next): Outcome {
    return compose(this.stages, last)(call);
  }
}
