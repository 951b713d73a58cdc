import { collectDefaultMetrics, Counter, Gauge, Registry } from "prom-client";
import type { Metric } from "prom-client";
import type { Clock } from "../shared/clock.js";
import type { QueuedTasks } from "../storage/compute-store.js";
import { CODE_NAMES } from "./call-tally.js";
import type { CallTallies } from "./call-tally.js";
import { callDurationHistogram } from "./call-duration.js";

export interface MetricSources {
  calls: CallTallies;
  keyCache: { readonly hits: number; readonly misses: number };
  taskQueue(): Promise<Record<"PENDING" | "RUNNING", QueuedTasks>>;
  clock: Clock;
}

const CALL_LABELS = ["service", "method", "protocol", "code"] as const;
const REFUSAL_LABELS = ["service", "method", "protocol", "reason"] as const;

// The registry /metrics renders. Everything cloudplane counts is kept as plain numbers where it happens (the call
// tallies of the metrics stage, the key cache's hits) and read into prom-client's metrics by their collect hooks
// when /metrics is scraped; Node's process metrics come from prom-client itself. One registry per server, so
// that several servers in one process (tests) do not share counts.
export function createMetricsRegistry(sources: MetricSources): Registry {
  const registry = new Registry();
  const { calls } = sources;

  new Counter({
    name: "cloudplane_calls_total",
    help: "Calls by service, method, protocol and google.rpc.Code name, whatever the protocol that carried them",
    labelNames: CALL_LABELS,
    registers: [registry],
    collect() {
      this.reset();
      for (const t of calls.all()) {
        t.codes.forEach((n, code) => {
          if (n > 0) this.inc({ service: t.service, method: t.method, protocol: t.protocol, code: CODE_NAMES[code]! }, n);
        });
      }
    },
  });

  registry.registerMetric(callDurationHistogram(calls) as unknown as Metric);

  new Counter({
    name: "cloudplane_resource_exhausted_total",
    help: "Calls refused with RESOURCE_EXHAUSTED, by the reason of their ErrorInfo (RATE_LIMIT_EXCEEDED, AUTHENTICATION_RATE_LIMITED ...)",
    labelNames: REFUSAL_LABELS,
    registers: [registry],
    collect() {
      this.reset();
      for (const t of calls.all()) {
        for (const [reason, n] of t.refusals) this.inc({ service: t.service, method: t.method, protocol: t.protocol, reason }, n);
      }
    },
  });

  new Counter({
    name: "cloudplane_key_cache_hits_total",
    help: "Key lookups of Encrypt, Decrypt and the key reads answered from the in-memory key cache",
    registers: [registry],
    collect() {
      this.reset();
      if (sources.keyCache.hits > 0) this.inc(sources.keyCache.hits);
    },
  });
  new Counter({
    name: "cloudplane_key_cache_misses_total",
    help: "Key lookups that had to read the key from storage",
    registers: [registry],
    collect() {
      this.reset();
      if (sources.keyCache.misses > 0) this.inc(sources.keyCache.misses);
    },
  });

  new Gauge({
    name: "cloudplane_task_queue_depth",
    help: "Node pool tasks not finished yet, by status (PENDING: waiting for a worker; RUNNING: taken by one)",
    labelNames: ["status"],
    registers: [registry],
    async collect() {
      const q = await sources.taskQueue();
      this.set({ status: "PENDING" }, q.PENDING.count);
      this.set({ status: "RUNNING" }, q.RUNNING.count);
    },
  });
  new Gauge({
    name: "cloudplane_task_queue_oldest_age_seconds",
    help: "Age of the oldest unfinished node pool task, by status; 0 when there is none",
    labelNames: ["status"],
    registers: [registry],
    async collect() {
      const q = await sources.taskQueue();
      const now = sources.clock.now();
      for (const status of ["PENDING", "RUNNING"] as const) {
        const oldest = q[status].oldestCreatedAt;
        this.set({ status }, oldest === null ? 0 : Math.max(0, (now - oldest) / 1000));
      }
    },
  });

  collectDefaultMetrics({ register: registry });
  return registry;
}
