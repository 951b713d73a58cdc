import { readFileSync } from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { parseArgs } from "node:util";
import { spawnServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { Random, grpcBody, grpcPaths, jsonBody, queryString, restPath, restRoutes } from "./generators.js";
import { runProperties } from "./property-runs.js";

// `npm run fuzz [-- --seconds N --seed S --concurrency C]`: random and hostile input on every surface of a real
// server for minutes: gRPC and gRPC-web frames, Connect bodies, REST paths, queries and bodies, raw HTTP/1.1
// garbage, and now and then a 4 MB label flood. Fails on a crash, any 5xx or INTERNAL answer, a call that
// hangs, or RSS that keeps growing. Prints a JSON summary; the figures of a long run are in docs/robustness.md.
// With --properties, runs the fast-check properties of test/property/ instead, for --runs inputs in all
// (property-runs.ts).

const { values: flags } = parseArgs({
  options: {
    seconds: { type: "string", default: "180" },
    seed: { type: "string", default: String(Date.now() % 1_000_000) },
    concurrency: { type: "string", default: "16" },
    // A server already running (its URL and process id), instead of one spawned for the run.
    // Only one kind of input: grpc, connect, rest-h1, rest-h2 or garbage (to narrow a finding down).
    only: { type: "string", default: "" },
    url: { type: "string", default: "" },
    pid: { type: "string", default: "" },
    // With --url: the admin's token of that server (POST /public/v2/service_auth with the client id and secret of
    // <data-dir>/admin-credentials.json). Without it every call but health and ServiceAuth is refused as
    // UNAUTHENTICATED, before the handlers the fuzzing is for. A spawned server's admin is logged in by the run.
    token: { type: "string", default: "" },
    // With --url and --properties: an API key of the admin and its workspace, which the configuration calls need
    // besides the token (`npm run admin -- api-keys create admin --workspace ID`). A spawned server's is made by the run.
    "api-key": { type: "string", default: "" },
    workspace: { type: "string", default: "" },
    // The property mode: --only then names properties (rest, grpc, grpc-messages, grpc-web, connect, comma-separated).
    properties: { type: "boolean", default: false },
    runs: { type: "string", default: "1000000" },
    // direct, connect or both (half the runs each); ignored with --url.
    "call-path": { type: "string", default: "both" },
    // The server's RSS must stay under this for the whole run (the bound of the hostile tests).
    "max-rss-mib": { type: "string", default: "400" },
  },
});
const seconds = Number(flags.seconds);
const seed = Number(flags.seed);
const CALL_TIMEOUT_MS = 15_000;

// The admin's "Bearer <token>", sent with nearly every call, so that the input reaches the handlers; one call in
// sixteen goes without credentials. Set once the server is known.
let authorization = "";
function credentials(r: Random): Record<string, string> {
  return authorization === "" || r.int(16) === 0 ? {} : { authorization };
}

// What was sent is kept only to describe a failure: the method, the headers that matter, the body's start.
type Outcome = { kind: string; status: string; sent?: string };

function describe(headers: http2.OutgoingHttpHeaders, body: Buffer): string {
  const shown = ["content-type", "grpc-encoding", "grpc-timeout"].filter((h) => headers[h] !== undefined).map((h) => `${h}=${String(headers[h])}`);
  return `${String(headers[":path"])} ${shown.join(" ")} body(${body.length})=${body.subarray(0, 48).toString("hex")}`;
}

function rssKb(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
}

// What Node's own client refuses to send (an invalid header value or path) never reaches the server.
const CLIENT_REFUSED = "client refused";

function h2Call(s: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body: Buffer): Promise<string> {
  return new Promise((resolve) => {
    let result = "no answer";
    let req: http2.ClientHttp2Stream;
    try {
      req = s.request(headers);
    } catch {
      resolve(CLIENT_REFUSED);
      return;
    }
    const timer = setTimeout(() => {
      result = "hung";
      req.close(http2.constants.NGHTTP2_CANCEL);
    }, CALL_TIMEOUT_MS);
    req.on("response", (h) => (result = h["grpc-status"] !== undefined ? `grpc ${h["grpc-status"]}` : `http ${h[":status"]}`));
    req.on("trailers", (t) => (result = `grpc ${t["grpc-status"]}`));
    req.on("data", () => {});
    req.on("error", () => {});
    req.on("close", () => {
      clearTimeout(timer);
      resolve(result === "no answer" ? `reset ${req.rstCode}` : result);
    });
    req.end(body);
  });
}

function h1Call(port: number, method: string, path: string, headers: Record<string, string>, body: string): Promise<string> {
  return new Promise((resolve) => {
    let req: http.ClientRequest;
    try {
      req = http.request({ host: "127.0.0.1", port, method, path, agent: false, timeout: CALL_TIMEOUT_MS, headers }, (res) => {
        res.resume();
        res.on("end", () => resolve(`http ${res.statusCode}`));
      });
    } catch {
      resolve(CLIENT_REFUSED);
      return;
    }
    req.on("timeout", () => {
      req.destroy();
      resolve("hung");
    });
    req.on("error", (e: NodeJS.ErrnoException) => resolve(`error ${e.code ?? e.message}`));
    req.end(body);
  });
}

// Bytes that are no HTTP at all, or HTTP/1.1 broken in some way; whatever comes back, the connection must end.
function garbage(port: number, r: Random): Promise<string> {
  const heads = [r.bytes(r.int(200)), Buffer.from(`${r.text(10)} / HTTP/1.1\r\n\r\n`), Buffer.from(`GET /${r.text(50)} HTTP/1.1\r\nHost: x\r\n${r.text(30)}\r\n\r\n`), Buffer.from(`POST /v1/keys HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${r.text(20)}\r\n`)];
  return new Promise((resolve) => {
    let first = "";
    const socket = net.connect(port, "127.0.0.1", () => socket.end(r.pick(heads)));
    socket.setTimeout(CALL_TIMEOUT_MS, () => {
      socket.destroy();
      resolve("hung");
    });
    socket.on("data", (d: Buffer) => (first ||= d.toString("latin1").split("\r\n")[0] ?? ""));
    socket.on("error", () => {});
    socket.on("close", () => resolve(/^HTTP\/1\.1 (\d+)/.exec(first)?.[1] !== undefined ? `http ${/^HTTP\/1\.1 (\d+)/.exec(first)?.[1]}` : "closed"));
  });
}

function labelFlood(s: http2.ClientHttp2Session): Promise<string> {
  const labels = Buffer.alloc(1_390_000 * 3);
  for (let i = 0; i < labels.length; i += 3) labels.set([0x22, 1, 0], i);
  const message = Buffer.concat([Buffer.from([0x0a, 4]), Buffer.from("fuzz"), labels]);
  const envelope = Buffer.alloc(5);
  envelope.writeUInt32BE(message.length, 1);
  const auth = authorization === "" ? {} : { authorization };
  return h2Call(s, { ":method": "POST", ":path": "/kms.v1.KeyManagerService/CreateCryptoKey", "content-type": "application/grpc", ...auth }, Buffer.concat([envelope, message]));
}

const kinds = ["grpc", "grpc", "connect", "rest-h1", "rest-h2", "garbage"];

async function one(r: Random, port: number, s: http2.ClientHttp2Session): Promise<Outcome> {
  const grpcTypes = ["application/grpc", "application/grpc+proto", "application/grpc-web+proto", "application/grpc-web"];
  let choice = r.int(kinds.length);
  while (flags.only !== "" && kinds[choice] !== flags.only) choice = r.int(kinds.length);
  switch (choice) {
    case 0:
    case 1: {
      const headers: http2.OutgoingHttpHeaders = { ":method": "POST", ":path": r.pick(grpcPaths), "content-type": r.pick(grpcTypes), te: "trailers", ...credentials(r) };
      if (r.int(8) === 0) headers["grpc-encoding"] = r.pick(["gzip", "br", "identity", r.text(4)]);
      if (r.int(8) === 0) headers["grpc-timeout"] = r.pick(["1m", "0n", "99999999H", r.text(3)]);
      const body = grpcBody(r);
      return { kind: "grpc", status: await h2Call(s, headers, body), sent: describe(headers, body) };
    }
    case 2: {
      const binary = r.int(2) === 0;
      const body = binary ? r.bytes(r.size()) : Buffer.from(jsonBody(r));
      const headers = { ":method": "POST", ":path": r.pick(grpcPaths), "content-type": binary ? "application/proto" : "application/json", ...credentials(r) };
      return { kind: "connect", status: await h2Call(s, headers, body), sent: describe(headers, body) };
    }
    case 3: {
      const [method, template] = r.pick(restRoutes);
      const path = restPath(r, template) + queryString(r);
      const body = method === "GET" || method === "DELETE" ? "" : jsonBody(r);
      const headers = { "content-type": r.pick(["application/json", "text/plain", r.text(8)]), ...credentials(r) };
      return { kind: "rest-h1", status: await h1Call(port, method, path, headers, body) };
    }
    case 4: {
      const [method, template] = r.pick(restRoutes);
      const headers = { ":method": method, ":path": restPath(r, template) + queryString(r), "content-type": "application/json", ...credentials(r) };
      const body = Buffer.from(method === "GET" ? "" : jsonBody(r));
      return { kind: "rest-h2", status: await h2Call(s, headers, body), sent: `${method} ${describe(headers, body)}` };
    }
    default:
      return { kind: "garbage", status: await garbage(port, r) };
  }
}

// A 5xx, an INTERNAL (13) or UNKNOWN (2) status, or a call that never ended.
function isFailure(status: string): boolean {
  return /^http 5/.test(status) || status === "grpc 13" || status === "grpc 2" || status === "hung";
}

async function main(): Promise<void> {
  const dir = tempDir("cloudplane-fuzz-");
  const server =
    flags.url === ""
      ? await spawnServer({ dataDir: dir.path })
      : { url: flags.url, token: flags.token, port: Number(new URL(flags.url).port), pid: Number(flags.pid), running: () => true, kill: async () => null };
  if (server.token === "") process.stderr.write("no --token: every call but health and ServiceAuth will be refused as UNAUTHENTICATED\n");
  else authorization = `Bearer ${server.token}`;
  const r = new Random(seed);
  const counts = new Map<string, number>();
  const failures: string[] = [];
  const rss: { s: number; kb: number }[] = [];
  const started = Date.now();
  let calls = 0;
  let floods = 0;
  const sampler = setInterval(() => rss.push({ s: Math.round((Date.now() - started) / 1000), kb: rssKb(server.pid) }), 5_000);
  try {
    const workers = Array.from({ length: Number(flags.concurrency) }, async (_, w) => {
      let s = http2.connect(server.url);
      s.on("error", () => {});
      while (Date.now() - started < seconds * 1000 && server.running()) {
        if (s.destroyed || s.closed) {
          s = http2.connect(server.url);
          s.on("error", () => {});
        }
        const { kind, status, sent } = w === 0 && calls % 500 === 0 ? { kind: "flood", status: await labelFlood(s) } : await one(r, server.port, s);
        if (kind === "flood") floods++;
        calls++;
        counts.set(`${kind} ${status}`, (counts.get(`${kind} ${status}`) ?? 0) + 1);
        if (isFailure(status) && failures.length < 20) failures.push(`${kind} ${status}: ${sent ?? ""}`);
      }
      s.destroy();
    });
    await Promise.all(workers);
  } finally {
    clearInterval(sampler);
  }
  const alive = server.running();
  await server.kill("SIGKILL");
  dir.remove();
  // Growth: the highest RSS of the last third of the run against that of the middle third.
  const third = Math.floor(rss.length / 3);
  const peak = (xs: { kb: number }[]): number => Math.max(0, ...xs.map((x) => x.kb));
  const middle = peak(rss.slice(third, 2 * third));
  const last = peak(rss.slice(2 * third));
  const growing = third > 0 && last > middle * 1.25 + 32 * 1024;
  const summary = {
    seed,
    seconds,
    calls,
    floods,
    callsPerSecond: Math.round(calls / seconds),
    alive,
    failures,
    rssMiB: { first: Math.round((rss[0]?.kb ?? 0) / 1024), middlePeak: Math.round(middle / 1024), lastPeak: Math.round(last / 1024), growing },
    outcomes: Object.fromEntries([...counts].sort((a, b) => b[1] - a[1])),
  };
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  const ok = alive && failures.length === 0 && !growing;
  process.stdout.write(ok ? "fuzz: PASS\n" : "fuzz: FAIL\n");
  process.exit(ok ? 0 : 1);
}

if (flags.properties) {
  const ok = await runProperties({
    runs: Number(flags.runs),
    seed,
    concurrency: Number(flags.concurrency),
    only: flags.only,
    url: flags.url,
    token: flags.token,
    apiKey: flags["api-key"],
    workspaceId: flags.workspace,
    pid: Number(flags.pid),
    callPath: flags["call-path"],
    maxRssMiB: Number(flags["max-rss-mib"]),
  });
  process.exit(ok ? 0 : 1);
} else {
  await main();
}
