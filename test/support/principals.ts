import { spawn } from "node:child_process";
import type { AuditRecord } from "../../src/identity/identity-model.js";
import { fetchToken } from "./credentials.js";
import type { TestServer } from "./server.js";
import { AUDIT_TABLE, auditRecords as storedAuditRecords, storeSnapshot } from "./store-snapshot.js";
import type { StoreSnapshot } from "./store-snapshot.js";

// What the access-control tests share: principals made on a running test server, the operator command run as an
// operator runs it, the audit trail read from the store, and a snapshot of what calls may change.

export interface Principal {
  // The principal id (`owner` of keys, `createdBy` of tasks, `principal` of audit records).
  id: string;
  name: string;
  clientId: string;
  clientSecret: string;
  token: string;
  // Authorization: Bearer <token>.
  auth: { authorization: string };
}

// A service account with grants of [role, scope] (scope as the operator command writes it: "kms-namespace:ns-a"),
// made through the server's own IdentityAdmin (so it applies at once), logged in over POST /public/v2/service_auth.
export async function makePrincipal(server: TestServer, name: string, grants: [string, string][]): Promise<Principal> {
  const created = await server.app.identity.createServiceAccount(name, grants);
  const token = await fetchToken(server.url, created.clientId, created.clientSecret);
  return { id: created.account.id, name, clientId: created.clientId, clientSecret: created.clientSecret, token, auth: { authorization: `Bearer ${token}` } };
}

// Every row of every table that a call could change: all but the audit trail (refusals of authenticated callers
// are recorded by design; tests check those records on their own) and the task workers' heartbeats (a timer
// rewrites them).
export function resourceSnapshot(dataDir: string): StoreSnapshot {
  const all = storeSnapshot(dataDir);
  delete all[AUDIT_TABLE];
  delete all["compute_workers"];
  return all;
}

// The audit trail as stored, oldest first, read through a connection of its own.
export function auditRecords(dataDir: string): (AuditRecord & { seq: number })[] {
  return storedAuditRecords(dataDir).map(({ request_id, ...r }) => ({ ...r, requestId: request_id }));
}

export interface CommandResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

// `cloudplane-admin --data-dir DIR ...args` as a process of its own, from the sources, as an operator runs it
// beside the server (npm run admin runs the built copy of the same file).
// `env` adds to the test's environment (DATABASE_URL: the command works on that database).
export function runAdminCli(dataDir: string, args: string[], env: Record<string, string> = {}): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "src/operator/cloudplane-admin.ts", "--data-dir", dataDir, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("error", reject);
    child.on("exit", (exitCode) => resolve({ exitCode, stdout, stderr }));
  });
}

// One record of `cloudplane-admin audit --json`: an AuditRecord with its time in ISO 8601.
export type AuditJsonLine = Omit<AuditRecord, "at"> & { at: string };

// Runs the command with --json and parses its lines; throws with its stderr when it fails.
export async function adminJson<T>(dataDir: string, args: string[]): Promise<T[]> {
  const result = await runAdminCli(dataDir, ["--json", ...args]);
  if (result.exitCode !== 0) throw new Error(`cloudplane-admin ${args.join(" ")} exited ${result.exitCode}: ${result.stderr}`);
  return result.stdout
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as T);
}
