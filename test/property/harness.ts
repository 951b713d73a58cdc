import { isDeepStrictEqual } from "node:util";
import fc from "fast-check";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { AUDIT_TABLE, auditRecords, storeSnapshot } from "../support/store-snapshot.js";
import type { StoreSnapshot } from "../support/store-snapshot.js";
import type { PropertySpec, Target } from "./properties.js";
import { H2Client } from "./wire.js";

// How the vitest files run the properties: a real server in this process on real sockets, a bounded number of
// runs (FAST_CHECK_RUNS, default 200; FAST_CHECK_SEED to replay a run), and after every refused request a check
// that the store did not change but for the audit record of the refusal, when the admin was refused.

export const RUNS = Number(process.env["FAST_CHECK_RUNS"] ?? "200");
const SEED = process.env["FAST_CHECK_SEED"] === undefined ? undefined : Number(process.env["FAST_CHECK_SEED"]);
// Generous: a call on loopback takes milliseconds; only a hang gets near it.
const CALL_TIMEOUT_MS = 10_000;
// The time one property may take in vitest: the runs, plus shrinking a counterexample on a real server.
export const PROPERTY_TEST_TIMEOUT_MS = 240_000;

export interface PropertyServer {
  server: TestServer;
  target: Target;
  // Ids of resources that exist, mixed into the random field values.
  known: string[];
  // How much of the server's log the last health check read.
  logsRead: number;
}

// The properties send bad credentials on purpose, from the address the admin's calls come from too: the limit of
// failed authentications per address (AUTH_FAILURES_PER_MINUTE) is set so high that they never block it.
export const PROPERTY_SERVER_ENV = { AUTH_FAILURES_PER_MINUTE: "1000000" };

// The workspace of the admin's API key that the properties send with the admin's token.
export const PROPERTY_WORKSPACE = "ws-prop";

export async function startPropertyServer(callPath: string): Promise<PropertyServer> {
  const server = await startServer({ env: { ...PROPERTY_SERVER_ENV, CALL_PATH: callPath } });
  const authorization = `Bearer ${server.token}`;
  const apiKey = (await server.app.identity.createApiKey("admin", PROPERTY_WORKSPACE)).text;
  const target: Target = { url: server.url, h2: new H2Client(server.url, CALL_TIMEOUT_MS), timeoutMs: CALL_TIMEOUT_MS, authorization, apiKey, workspaceId: PROPERTY_WORKSPACE };
  const res = await fetch(`${server.url}/v1/keys`, { method: "POST", headers: { "content-type": "application/json", authorization }, body: JSON.stringify({ parentId: "prop" }) });
  if (res.status !== 200) throw new Error(`could not create the known key: HTTP ${res.status} ${await res.text()}`);
  const key = (await res.json()) as { id: string };
  return { server, target, known: [key.id], logsRead: 0 };
}

export async function stopPropertyServer(ps: PropertyServer | undefined): Promise<void> {
  ps?.target.h2.close();
  await ps?.server.stop();
}

// Every row of every table but the task workers' heartbeats, which a timer rewrites, and the audit trail, which
// records refusals too (checked apart: refusalAuditProblem).
function snapshot(dataDir: string): StoreSnapshot {
  return storeSnapshot(dataDir, { except: ["compute_workers", AUDIT_TABLE] });
}

// A refusal adds at most its own audit record, and only when the caller was authenticated: here that is the admin,
// the one principal of a property server. A caller with no or bad credentials leaves no trace in the trail.
function refusalAuditProblem(dataDir: string, recordedBefore: number, adminId: string): string | null {
  const added = auditRecords(dataDir).slice(recordedBefore);
  if (added.length === 0) return null;
  if (added.length > 1) return `a refused request added ${added.length} audit records`;
  const [record] = added;
  if (record!.principal !== adminId) return `a refused request added an audit record of ${record!.principal}, not of the admin`;
  if (record!.code === 0) return "a refused request was recorded as a success";
  return null;
}

function changedTables(before: StoreSnapshot, after: StoreSnapshot): string[] {
  return [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((t) => !isDeepStrictEqual(before[t], after[t]));
}

// A completed call may have started work that goes on after its answer (a node pool's provisioning task): wait
// until the store stops changing, so that it is not blamed on the next request.
async function settle(dataDir: string): Promise<void> {
  let last = snapshot(dataDir);
  for (let i = 0; i < 40; i++) {
    await new Promise((r) => setTimeout(r, 25));
    const now = snapshot(dataDir);
    if (isDeepStrictEqual(now, last)) return;
    last = now;
  }
}

// Checks one property `runs` times; a failure throws fast-check's report: the seed, and the shrunk
// counterexample (the plan that was sent) with what was sent on the wire and what came back.
export async function checkProperty<T>(spec: PropertySpec<T>, ps: PropertyServer, runs = RUNS): Promise<void> {
  const { dataDir, adminId } = ps.server;
  await fc.assert(
    fc.asyncProperty(spec.arbitrary(ps.known), async (input) => {
      const before = snapshot(dataDir);
      const recorded = auditRecords(dataDir).length;
      const outcome = await spec.run(ps.target, input);
      if (outcome.failure !== null) throw new Error(`${outcome.failure}\n  sent: ${outcome.sent}\n  answer: ${outcome.answer}`);
      if (outcome.succeeded) {
        await settle(dataDir);
        return;
      }
      const changed = changedTables(before, snapshot(dataDir));
      if (changed.length > 0) throw new Error(`a refused request changed the store (${changed.join(", ")})\n  sent: ${outcome.sent}\n  answer: ${outcome.answer}`);
      const audit = refusalAuditProblem(dataDir, recorded, adminId);
      if (audit !== null) throw new Error(`${audit}\n  sent: ${outcome.sent}\n  answer: ${outcome.answer}`);
    }),
    { numRuns: runs, ...(SEED === undefined ? {} : { seed: SEED }) },
  );
}

// The server still answers its health check at once, and logged no error (an INTERNAL answered as something
// else would still log one).
export async function healthProblems(ps: PropertyServer): Promise<string[]> {
  const problems: string[] = [];
  try {
    const res = await fetch(`${ps.server.url}/healthz`, { signal: AbortSignal.timeout(2_000) });
    if (res.status !== 200) problems.push(`/healthz answered ${res.status}`);
  } catch (err) {
    problems.push(`/healthz did not answer: ${String(err)}`);
  }
  const logs = ps.server.logs();
  const unread = logs.slice(ps.logsRead);
  ps.logsRead = logs.length;
  for (const line of unread.split("\n")) {
    if (line === "") continue;
    const level = (JSON.parse(line) as { level?: number }).level ?? 0;
    if (level >= 50) problems.push(`error logged: ${line.slice(0, 600)}`);
  }
  return problems;
}
