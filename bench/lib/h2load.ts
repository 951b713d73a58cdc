import { existsSync } from "node:fs";
import { runToEnd } from "./children.js";

// Runs nghttp2's h2load against one endpoint and reads its summary: over h2c for gRPC, gRPC-web and Connect, or
// over HTTP/1.1 keep-alive connections (`--h1`, one request at a time on each) for REST.

export interface LoadOptions {
  url: string;
  // The request body, posted; null: a GET.
  bodyFile: string | null;
  // Request headers besides h2load's own, e.g. "content-type: application/grpc".
  headers: string[];
  // HTTP/1.1 instead of h2c; `streams` must then be 1 (h2load would pipeline otherwise).
  h1: boolean;
  clients: number;
  streams: number;
  durationS: number;
  warmupS: number;
  // CPU list for taskset, or null to let the scheduler place h2load.
  cpu: string | null;
}

export interface LoadResult {
  reqPerS: number;
  done: number;
  succeeded: number;
  failed: number;
  errored: number;
  timeout: number;
  status2xx: number;
  statusOther: number;
  // Bytes h2load received (frames, headers and data) over the measured period, per finished request.
  receivedPerRequest: number;
  meanLatencyMs: number;
  maxLatencyMs: number;
}

export const H2LOAD = "/usr/bin/h2load";

export async function ensureH2load(): Promise<string> {
  for (const path of [H2LOAD, "/usr/local/bin/h2load"]) if (existsSync(path)) return path;
  if (process.getuid?.() !== 0) throw new Error("h2load is missing: install it with `apt-get install -y nghttp2-client`");
  process.stdout.write("h2load is missing: installing nghttp2-client with apt-get\n");
  const install = await runToEnd("apt-get", "apt-get", ["install", "-y", "--no-install-recommends", "nghttp2-client"], 300_000, {
    env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
  });
  if (install.code !== 0 || !existsSync(H2LOAD)) throw new Error(`could not install nghttp2-client:\n${install.output.slice(-2000)}`);
  return H2LOAD;
}

function number(text: string, pattern: RegExp, what: string): number {
  const match = pattern.exec(text);
  if (match?.[1] === undefined) throw new Error(`h2load output has no ${what}:\n${text.slice(-3000)}`);
  return Number(match[1]);
}

function milliseconds(value: string, unit: string): number {
  const n = Number(value);
  return unit === "us" ? n / 1000 : unit === "ms" ? n : n * 1000;
}

export function parseH2load(text: string): LoadResult {
  const latency = /time for request:\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)/.exec(text);
  const done = number(text, /requests: \d+ total, \d+ started, (\d+) done/, "done count");
  const received = number(text, /traffic: [\d.]+\w?B \((\d+)\) total/, "traffic total");
  return {
    reqPerS: number(text, /finished in [\d.]+\w+, ([\d.]+) req\/s/, "req/s"),
    done,
    succeeded: number(text, /(\d+) succeeded/, "succeeded count"),
    failed: number(text, /(\d+) failed/, "failed count"),
    errored: number(text, /(\d+) errored/, "errored count"),
    timeout: number(text, /(\d+) timeout/, "timeout count"),
    status2xx: number(text, /status codes: (\d+) 2xx/, "2xx count"),
    statusOther: ["3xx", "4xx", "5xx"].reduce((sum, c) => sum + number(text, new RegExp(`(\\d+) ${c}`), `${c} count`), 0),
    receivedPerRequest: done === 0 ? 0 : received / done,
    meanLatencyMs: latency === null ? NaN : milliseconds(latency[5]!, latency[6]!),
    maxLatencyMs: latency === null ? NaN : milliseconds(latency[3]!, latency[4]!),
  };
}

export async function runH2load(h2load: string, o: LoadOptions): Promise<{ result: LoadResult; output: string }> {
  const args = [
    "-c", String(o.clients),
    "-m", String(o.streams),
    "-t", "1",
    "-D", String(o.durationS),
    "--warm-up-time", String(o.warmupS),
    ...(o.bodyFile === null ? [] : ["-d", o.bodyFile]),
    ...o.headers.flatMap((h) => ["-H", h]),
    ...(o.h1 ? ["--h1"] : []),
    o.url,
  ];
  const [command, full] = o.cpu === null ? [h2load, args] : ["taskset", ["-c", o.cpu, h2load, ...args]];
  const limitMs = (o.durationS + o.warmupS + 30) * 1000;
  const { code, output } = await runToEnd("h2load", command, full, limitMs);
  if (code !== 0) throw new Error(`h2load exited with ${code}:\n${output.slice(-3000)}`);
  return { result: parseH2load(output), output };
}
