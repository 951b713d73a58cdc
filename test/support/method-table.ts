import { create } from "@bufbuild/protobuf";
import type { DescService } from "@bufbuild/protobuf";
import type { ServedService, UnaryHandler } from "../../src/pipeline/handlers.js";
import { MethodTable } from "../../src/pipeline/method-table.js";
import type { Stage } from "../../src/pipeline/stage.js";
import type { Logger } from "pino";
import { AuditTrail } from "../../src/identity/audit-trail.js";
import type { AuditRecord } from "../../src/identity/identity-model.js";
import { pipelineStages } from "../../src/pipeline/stages.js";
import { MemoryRateLimiter } from "../../src/ratelimit/memory-rate-limiter.js";
import { systemClock } from "../../src/shared/clock.js";

// A method table of the given services for tests of the layers above it (REST routes, request building): each
// method answers with `handlers[localName]`, or with an empty response.
export function methodTableOf(services: DescService[], handlers: Record<string, UnaryHandler> = {}, stages: Stage[] = []): MethodTable {
  const served: ServedService[] = services.map((service) => ({
    service,
    handlers: Object.fromEntries(service.methods.map((m) => [m.localName, handlers[m.localName] ?? (() => create(m.output))])),
  }));
  return new MethodTable(served, [], stages);
}

// The pipeline's stages for tests that build a server of their own without a store: every stage but the access
// checks (PIPELINE_STAGES=no-access), with the audit trail kept in `records`, and no service rate-limited.
export function stagesWithoutAccess(logger: Logger, records: AuditRecord[] = []): Stage[] {
  const audit = new AuditTrail({ append: async (batch) => void records.push(...batch), query: async () => [], prune: async () => 0 }, logger);
  const limits = { GET: { perMinute: 1, perDay: 1 }, POST: { perMinute: 1, perDay: 1 } };
  const rateLimits = { limiter: new MemoryRateLimiter(limits), limits, services: [], onStoreFailure: "open" as const };
  return pipelineStages({ logger, clock: systemClock, maxCallMs: 60_000, mode: "no-access", access: null, audit, metrics: null, rateLimits, draining: new AbortController().signal, extra: [] });
}
