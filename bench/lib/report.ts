import { AREA_NAMES } from "./profile-shares.js";
import type { ProfileShares } from "./profile-shares.js";
import type { Target } from "./scenarios.js";
import type { ServerName } from "./servers.js";

// The results table, the verdicts against the issue's targets, and where the profiled servers' time went.

export interface Row {
  scenario: string;
  protocol: string;
  method: string;
  payload: string;
  server: ServerName;
  reqPerS: number;
  // The req/s of every window of every round; reqPerS is their median, spreadPercent their range relative to it.
  readings: number[];
  spreadPercent: number;
  // This row's req/s over the req/s of each reference server of the same scenario (itself included: 1.00x).
  ratios: Partial<Record<ServerName, number>>;
  meanLatencyMs: number;
  // Share of one CPU the server used during the run, and what that is per request.
  cpuPercent: number;
  cpuUsPerRequest: number;
  // Most CPU time other processes took on the servers' CPU during this row's runs, as % of the wall time.
  foreignCpuPercent: number | null;
  // The scenario's targets, for cloudplane and candidate rows that have any; null otherwise.
  verdict: "PASS" | "FAIL" | null;
}

export interface TargetCheck {
  scenario: string;
  server: ServerName;
  target: Target;
  // The ratio (kind "ratio") or the cost (kind "cost") measured.
  value: number;
  pass: boolean;
  text: string;
}

export function checkTarget(row: Row, target: Target): TargetCheck {
  const ratio = row.ratios[target.against] ?? NaN;
  if (target.kind === "ratio") {
    const pass = ratio >= target.atLeast;
    return { scenario: row.scenario, server: row.server, target, value: ratio, pass, text: `${row.server} ${ratio.toFixed(2)}x ${target.against} (target >= ${target.atLeast}x)` };
  }
  const cost = 1 - ratio;
  const pass = cost <= target.atMost;
  const text = `${target.what} = 1 - ${row.server} / ${target.against} req/s = ${(cost * 100).toFixed(1)}% (target <= ${(target.atMost * 100).toFixed(0)}%)`;
  return { scenario: row.scenario, server: row.server, target, value: cost, pass, text };
}

function table(header: string[], rows: string[][], rightAligned: Set<number>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]): string =>
    `| ${cells.map((c, i) => (rightAligned.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(" | ")} |`;
  const rule = `|${widths.map((w, i) => (rightAligned.has(i) ? `${"-".repeat(w + 1)}:` : "-".repeat(w + 2))).join("|")}|`;
  return [line(header), rule, ...rows.map(line)].join("\n");
}

// One "vs <server>" column per reference server that appears in any row, in the order given.
export function resultsTable(rows: Row[], references: ServerName[]): string {
  const columns = references.filter((ref) => rows.some((r) => r.ratios[ref] !== undefined));
  const header = ["server", "protocol", "method", "payload", "req/s", "spread", ...columns.map((c) => `vs ${c}`), "mean latency", "server CPU", "CPU/req", "target"];
  const cells = rows.map((r) => [
    r.server,
    r.protocol,
    r.method,
    r.payload,
    r.reqPerS.toFixed(0),
    r.readings.length > 1 ? `±${(r.spreadPercent / 2).toFixed(0)}%` : "",
    ...columns.map((c) => (r.ratios[c] === undefined ? "" : `${r.ratios[c].toFixed(2)}x`)),
    `${r.meanLatencyMs.toFixed(1)} ms`,
    `${r.cpuPercent.toFixed(0)}%`,
    `${r.cpuUsPerRequest.toFixed(0)} µs`,
    r.verdict ?? "",
  ]);
  const numeric = new Set(Array.from({ length: header.length - 5 }, (_, i) => i + 4));
  return table(header, cells, numeric);
}

export function memoryTable(peaks: { server: ServerName; peakRssBytes: number | null }[]): string {
  const mib = (b: number | null): string => (b === null ? "n/a" : `${(b / (1 << 20)).toFixed(0)} MiB`);
  return table(["server", "peak RSS (VmHWM)"], peaks.map((p) => [p.server, mib(p.peakRssBytes)]), new Set([1]));
}

// One row per CPU profile (--cpu-prof): the busy seconds it covers and the share of each area of the code.
export function profileTable(profiles: ({ name: string } & ProfileShares)[]): string {
  const header = ["profile", "busy", "busy/cipher", ...AREA_NAMES];
  const cells = profiles.map((p) => [
    p.name,
    `${p.busyS.toFixed(1)} s`,
    p.busyPerCipher === null ? "-" : p.busyPerCipher.toFixed(2),
    ...AREA_NAMES.map((a) => `${((p.shares.get(a) ?? 0) * 100).toFixed(1)}%`),
  ]);
  return table(header, cells, new Set(header.map((_, i) => i).filter((i) => i > 0)));
}
