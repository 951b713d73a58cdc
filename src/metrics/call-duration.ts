import type { CallTallies } from "./call-tally.js";
import { DURATION_BUCKETS_S } from "./call-tally.js";

interface Sample {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

const NAME = "cloudplane_call_duration_seconds";

// The call duration histogram, by service, method and protocol, read from the tallies at scrape time. prom-client's
// Histogram can only be filled one observe() at a time, which hashes the labels on every call (call-tally.ts), so
// this is the metric object its registry renders (name, help, type, aggregator and get(), the shape of every
// prom-client metric), with the cumulative buckets, sum and count Prometheus expects.
export function callDurationHistogram(calls: CallTallies) {
  return {
    name: NAME,
    help: "Time from the start of the call pipeline to the handler's answer (or the refusal), by service, method and protocol",
    type: "histogram",
    aggregator: "sum",
    get() {
      const values: Sample[] = [];
      for (const t of calls.all()) {
        const labels = { service: t.service, method: t.method, protocol: t.protocol };
        let cumulative = 0;
        DURATION_BUCKETS_S.forEach((le, i) => {
          cumulative += t.buckets[i]!;
          values.push({ metricName: `${NAME}_bucket`, labels: { ...labels, le }, value: cumulative });
        });
        values.push({ metricName: `${NAME}_bucket`, labels: { ...labels, le: "+Inf" }, value: t.count });
        values.push({ metricName: `${NAME}_sum`, labels, value: t.seconds });
        values.push({ metricName: `${NAME}_count`, labels, value: t.count });
      }
      return Promise.resolve({ name: NAME, help: this.help, type: this.type, aggregator: this.aggregator, values });
    },
  };
}
