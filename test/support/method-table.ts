import { create } from "@bufbuild/protobuf";
import type { DescService } from "@bufbuild/protobuf";
import type { ServedService, UnaryHandler } from "../../src/pipeline/handlers.js";
import { MethodTable } from "../../src/pipeline/method-table.js";
import type { Stage } from "../../src/pipeline/stage.js";

// A method table of the given services for tests of the layers above it (REST routes, request building): each
// method answers with `handlers[localName]`, or with an empty response.
export function methodTableOf(services: DescService[], handlers: Record<string, UnaryHandler> = {}, stages: Stage[] = []): MethodTable {
  const served: ServedService[] = services.map((service) => ({
    service,
    handlers: Object.fromEntries(service.methods.map((m) => [m.localName, handlers[m.localName] ?? (() => create(m.output))])),
  }));
  return new MethodTable(served, [], stages);
}
