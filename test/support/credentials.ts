import { readFileSync } from "node:fs";
import https from "node:https";
import { join } from "node:path";

// Every server a test starts bootstraps an admin service account (src/identity/bootstrap.ts). The test support
// exchanges its credentials for a token as soon as the server listens and keeps it here by the server's origin,
// so that every helper that calls a server (clients of each protocol, raw frames, fetch) sends the admin's token
// unless the test says otherwise. Tests of access control make principals of their own.

const tokens = new Map<string, string>();

export interface AdminCredentials {
  client_id: string;
  client_secret: string;
}

export function adminCredentials(dataDir: string): AdminCredentials {
  return JSON.parse(readFileSync(join(dataDir, "admin-credentials.json"), "utf8")) as AdminCredentials;
}

// POST /public/v2/service_auth, as a caller would.
export async function fetchToken(baseUrl: string, clientId: string, clientSecret: string): Promise<string> {
  const res = await postJson(`${baseUrl}/public/v2/service_auth`, JSON.stringify({ client_id: clientId, client_secret: clientSecret }));
  const body = JSON.parse(res.text) as { token?: { access_token?: string } };
  const token = body.token?.access_token;
  if (res.status !== 200 || token === undefined) throw new Error(`service_auth answered ${res.status}: ${res.text}`);
  return token;
}

// fetch, or over TLS node:https, which accepts the self-signed certificates tests make (fetch cannot be told to).
async function postJson(url: string, body: string): Promise<{ status: number; text: string }> {
  const headers = { "content-type": "application/json" };
  if (!url.startsWith("https:")) {
    const res = await fetch(url, { method: "POST", headers, body });
    return { status: res.status, text: await res.text() };
  }
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method: "POST", headers, rejectUnauthorized: false }, (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

// Logs in as the server's admin and remembers the token for its origin.
export async function loginAsAdmin(baseUrl: string, dataDir: string): Promise<string> {
  const admin = adminCredentials(dataDir);
  const token = await fetchToken(baseUrl, admin.client_id, admin.client_secret);
  tokens.set(new URL(baseUrl).origin, token);
  return token;
}

// The admin token of the server at `url` (any URL or host:port of it).
export function adminToken(url: string): string {
  const origin = url.includes("://") ? new URL(url).origin : `http://${url}`;
  const token = tokens.get(origin);
  if (token === undefined) throw new Error(`no admin token for ${origin}: was the server started by test/support/server.ts?`);
  return token;
}

// Authorization with the admin token of the server at `url`.
export function adminAuth(url: string): { authorization: string } {
  return { authorization: `Bearer ${adminToken(url)}` };
}
