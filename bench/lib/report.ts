import type { ServerName } from "./servers.js";

// The results table and the verdict against the issue's targets.

export const TARGET_VS_GRPC_JS = 1.2;
export const TARGET_VS_HTTP2 = 0.85;

export interface Row {
  server: ServerName;
  method: "Encrypt" | "Decrypt";
  payload: string;
  reqPerS: number;
  // Every round's req/s; reqPerS is their median, spreadPercent their range relative to it.
  rounds: number[];
  spreadPercent: number;
  vsGrpcJs: number;
  vsHttp2: number;
  meanLatencyMs: number;
  // Share of one CPU the server used during the run, and what that is per request.
  cpuPercent: number;
  cpuUsPerRequest: number;
  // Most CPU time other processes took on the servers' CPU during this row's runs, as % of the wall time.
  foreignCpuPercent: number | null;
  verdict: "PASS" | "FAIL" | null;
}

export function verdict(vsGrpcJs: number, vsHttp2: number): "PASS" | "FAIL" {
  return vsGrpcJs >= TARGET_VS_GRPC_JS && vsHttp2 >= TARGET_VS_HTTP2 ? "PASS" : "FAIL";
}

function table(header: string[], rows: string[][], rightAligned: Set<number>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]): string =>
    `| ${cells.map((c, i) => (rightAligned.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(" | ")} |`;
  const rule = `|${widths.map((w, i) => (rightAligned.has(i) ? `${"-".repeat(w + 1)}:` : "-".repeat(w + 2))).join("|")}|`;
  return [line(header), rule, ...rows.map(line)].join("\n");
}

export function resultsTable(rows: Row[]): string {
  const header = ["server", "method", "payload", "req/s", "spread", "vs grpc-js", "vs http2", "mean latency", "server CPU", "CPU/req", "target"];
  const cells = rows.map((r) => [
    r.server,
    r.method,
    r.payload,
    r.reqPerS.toFixed(0),
    r.rounds.length > 1 ? `±${(r.spreadPercent / 2).toFixed(0)}%` : "",
    `${r.vsGrpcJs.toFixed(2)}x`,
    `${r.vsHttp2.toFixed(2)}x`,
    `${r.meanLatencyMs.toFixed(1)} ms`,
    `${r.cpuPercent.toFixed(0)}%`,
    `${r.cpuUsPerRequest.toFixed(0)} µs`,
    r.verdict ?? "",
  ]);
  return table(header, cells, new Set([3, 4, 5, 6, 7, 8, 9]));
}

export function memoryTable(peaks: { server: ServerName; peakRssBytes: number | null }[]): string {
  const mib = (b: number | null): string => (b === null ? "n/a" : `${(b / (1 << 20)).toFixed(0)} MiB`);
  return table(["server", "peak RSS (VmHWM)"], peaks.map((p) => [p.server, mib(p.peakRssBytes)]), new Set([1]));
}
