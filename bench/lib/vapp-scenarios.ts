import http from "node:http";
import { XMLParser } from "fast-xml-parser";
import type { LoadResult } from "./h2load.js";
import type { Body } from "./payloads.js";
import type { LoopContext, Scenario } from "./scenarios.js";

// The virtualization API in `npm run bench` (issue 11): GET /api/query?type=vAppTemplate under h2load over
// HTTP/1.1, beside REST Encrypt, and instantiate-to-success round trips: POST instantiateVAppTemplate, then GET the
// task until it reports success, by a few keep-alive clients in a closed loop, with the simulated platform's build
// delay at zero (servers.ts), so that the figure is the server's: the XML surface, the pipeline, the store writes
// and the task engine.

// The shipped catalog's Moscow vDC and its Ubuntu template (catalog/default-catalog.json).
const VDC = "6f1c2a4e-3b7d-4e59-9a0c-8d2f1e3b5a71";
const TEMPLATE = "c2d4f6a8-1b3e-4d5f-8a7c-9e0b2d4f6a81";
const ACCEPT = "application/*+xml;version=38.0";
const PARAMS_TYPE = "application/vnd.vmware.vcloud.instantiateVAppTemplateParams+xml";
const QUERY_PATH = "/api/query?type=vAppTemplate&pageSize=25";
// Clients of the instantiation loop, each with one keep-alive connection.
const LOOP_CLIENTS = 8;

const parser = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "@_", isArray: (name) => name === "VAppTemplateRecord" || name === "Task" });

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

function request(agent: http.Agent, port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method, path, headers, agent, timeout: 10_000 }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`${method} ${path}: no answer within 10 s`)));
    req.on("error", reject);
    req.end(body);
  });
}

export const vcdQuery: Scenario = {
  id: "vcd-query",
  protocol: "VCD XML",
  method: "query vAppTemplate",
  payload: "-",
  servers: ["cloudplane"],
  targets: [],
  transport: "http1",
  path: QUERY_PATH,
  headers: [`accept: ${ACCEPT}`],
  async prepare({ subject: s }): Promise<Body> {
    const agent = new http.Agent({ keepAlive: false });
    const answer = await request(agent, s.server.port, "GET", QUERY_PATH, { accept: ACCEPT, authorization: s.authorization });
    const records = (parser.parse(answer.text) as { QueryResultRecords?: { VAppTemplateRecord?: unknown[] } }).QueryResultRecords?.VAppTemplateRecord ?? [];
    if (answer.status !== 200 || records.length === 0) throw new Error(`${s.name} query: HTTP ${answer.status}, ${answer.text.slice(0, 200)}`);
    return { file: null, responseBytes: Buffer.byteLength(answer.text) };
  },
};

let names = 0;

// One round trip: instantiate, then read the task until it succeeds. Throws on anything else.
async function roundTrip(agent: http.Agent, port: number, authorization: string): Promise<void> {
  const name = `bench-${process.pid}-${++names}`;
  const body =
    `<?xml version="1.0" encoding="UTF-8"?>\n<InstantiateVAppTemplateParams xmlns="http://www.vmware.com/vcloud/v1.5" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1" name="${name}" powerOn="true">` +
    `<InstantiationParams><NetworkConfigSection><ovf:Info>networks</ovf:Info><NetworkConfig networkName="org-net-default"/></NetworkConfigSection></InstantiationParams>` +
    `<Source href="https://127.0.0.1:${port}/api/vAppTemplate/vappTemplate-${TEMPLATE}"/></InstantiateVAppTemplateParams>`;
  const headers = { accept: ACCEPT, authorization, host: `127.0.0.1:${port}` };
  const made = await request(agent, port, "POST", `/api/vdc/${VDC}/action/instantiateVAppTemplate`, { ...headers, "content-type": PARAMS_TYPE }, body);
  if (made.status !== 201) throw new Error(`instantiate: HTTP ${made.status}, ${made.text.slice(0, 300)}`);
  const task = (parser.parse(made.text) as { VApp: { Tasks: { Task: Record<string, string>[] } } }).VApp.Tasks.Task[0]!;
  const path = new URL(task["@_href"]!).pathname;
  for (;;) {
    const read = await request(agent, port, "GET", path, headers);
    const status = (parser.parse(read.text) as { Task?: Record<string, string>[] }).Task?.[0]?.["@_status"];
    if (status === "success") return;
    if (read.status !== 200 || status === "error") throw new Error(`task ${path}: HTTP ${read.status}, ${read.text.slice(0, 300)}`);
  }
}

// Closed loop: each client starts its next round trip when the last one ended. Round trips of the warm-up are not
// counted.
async function instantiateLoop({ subject: s, durationS, warmupS }: LoopContext): Promise<LoadResult> {
  const started = performance.now();
  const measureFrom = started + warmupS * 1000;
  const end = measureFrom + durationS * 1000;
  const latencies: number[] = [];
  let failed = 0;
  await Promise.all(
    Array.from({ length: LOOP_CLIENTS }, async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        while (performance.now() < end) {
          const t0 = performance.now();
          try {
            await roundTrip(agent, s.server.port, s.authorization);
          } catch (err) {
            failed++;
            if (failed === 1) process.stderr.write(`${String(err)}\n`);
          }
          const t1 = performance.now();
          if (t0 >= measureFrom && t1 <= end) latencies.push(t1 - t0);
        }
      } finally {
        agent.destroy();
      }
    }),
  );
  const done = latencies.length;
  const mean = done === 0 ? NaN : latencies.reduce((a, b) => a + b, 0) / done;
  return {
    reqPerS: done / durationS,
    done,
    succeeded: done,
    failed,
    errored: 0,
    timeout: 0,
    status2xx: done,
    statusOther: 0,
    receivedPerRequest: 0,
    meanLatencyMs: mean,
    maxLatencyMs: done === 0 ? NaN : Math.max(...latencies),
  };
}

export const vcdInstantiate: Scenario = {
  id: "vcd-instantiate",
  protocol: "VCD XML",
  method: "instantiate to success",
  payload: "-",
  servers: ["cloudplane"],
  targets: [],
  transport: "http1",
  path: `/api/vdc/${VDC}/action/instantiateVAppTemplate`,
  headers: [],
  loop: instantiateLoop,
  async prepare({ subject: s }): Promise<Body> {
    const agent = new http.Agent({ keepAlive: false });
    await roundTrip(agent, s.server.port, s.authorization);
    return { file: null, responseBytes: 0 };
  },
};
