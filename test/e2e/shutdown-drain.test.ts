import http from "node:http";
import { describe, expect, it } from "vitest";
import type { Stage } from "../../src/pipeline/stage.js";
import { spawnServer, startServer } from "../support/server.js";
import { auditRecords } from "../support/store-snapshot.js";
import { injectWriteFailure } from "../support/write-failure.js";
import { tempDir } from "../support/temp-dir.js";

// A call that arrives on a kept-alive HTTP/1.1 connection after the server began to shut down used to be served:
// the drain waited for the calls running when it began, then the audit trail's last batch was stored and the store
// closed under the newcomer. On PostgreSQL such a call committed its key and then failed to store its record,
// answered UNAVAILABLE, "retry later" (a probe, 2026-11-28): a change made, unrecorded, and made twice by a retry.
// Now it is refused before any stage that could write, and its connection is closed with the answer.

interface Answer {
  status: number;
  connection: string | undefined;
  body: { code?: number; message?: string; details?: { typeUrl?: string }[] };
}

function post(agent: http.Agent, url: string, token: string, path: string, body: object, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}${path}`, { method: "POST", agent, headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...headers } }, (res) => {
      let text = "";
      res.on("data", (chunk: Buffer) => (text += chunk.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body: JSON.parse(text) as Answer["body"] }));
    });
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

describe("shutting down", () => {
  it("refuses a call that arrives during the drain, before it changes anything, and closes its connection", async () => {
    const data = tempDir();
    // Holds each call marked `x-hold: <name>` until the test releases that name, so that the drain has calls in
    // flight to wait for, and a kept-alive connection is busy (not idle, which the shutdown closes) when it begins.
    const holds = new Map<string, { reached: Promise<void>; reach: () => void; released: Promise<void>; release: () => void }>();
    const holdOf = (name: string) => {
      let hold = holds.get(name);
      if (hold === undefined) {
        let reach = (): void => {};
        let release = (): void => {};
        const reached = new Promise<void>((resolve) => (reach = resolve));
        const released = new Promise<void>((resolve) => (release = resolve));
        hold = { reached, reach, released, release };
        holds.set(name, hold);
      }
      return hold;
    };
    const hold: Stage = (call, next) => {
      const name = call.headers.get("x-hold") ?? null;
      if (name === null) return next(call);
      holdOf(name).reach();
      return holdOf(name).released.then(() => next(call));
    };
    const server = await startServer({ dataDir: data.path, stages: [hold] });
    const first = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const second = new http.Agent({ keepAlive: true, maxSockets: 1 });
    let closing: Promise<void> | null = null;
    try {
      const held = post(first, server.url, server.token, "/v1/keys", { parentId: "drain", name: "held" }, { "x-hold": "held" });
      const busy = post(second, server.url, server.token, "/v1/keys", { parentId: "drain", name: "busy" }, { "x-hold": "busy" });
      await Promise.all([holdOf("held").reached, holdOf("busy").reached]);
      closing = server.app.close();
      // Both calls were running when the drain began: each is answered as usual. The second connection then
      // carries a call that arrived during the drain.
      holdOf("busy").release();
      expect((await busy).status).toBe(200);
      const late = await post(second, server.url, server.token, "/v1/keys", { parentId: "drain", name: "late" });
      expect(late).toMatchObject({ status: 503, connection: "close", body: { code: 14, message: "the server is shutting down" } });
      holdOf("held").release();
      expect((await held).status).toBe(200);
      await closing;
    } finally {
      for (const hold of holds.values()) hold.release();
      if (closing === null) await server.app.close();
      first.destroy();
      second.destroy();
    }
    // On the same store: the key of the refused call was never made.
    const again = await startServer({ dataDir: data.path });
    try {
      const res = await fetch(`${again.url}/v1/keys?parentId=drain`, { headers: { authorization: `Bearer ${again.token}` } });
      const names = ((await res.json()) as { keys?: { name: string }[] }).keys?.map((k) => k.name);
      expect(names?.sort()).toEqual(["busy", "held"]);
    } finally {
      await again.stop();
      data.remove();
    }
  });
});

// HTTP/1.1 keep-alive connections idle at SIGTERM were closed at once, and so was every connection once the calls
// running had ended: a client whose next request was on its way met a reset (ECONNRESET, or undici's "other side
// closed"), not knowing whether its POST ran; every rolling restart of a probe did this to 1-16 calls (2026-11-28).
// Now such a request is answered 503 SERVER_SHUTTING_DOWN on a connection that closes with it.
describe("SIGTERM under HTTP/1.1 keep-alive load", () => {
  it("answers every request that reaches the server, and resets none", { timeout: 30_000 }, async () => {
    const data = tempDir();
    const server = await spawnServer({ dataDir: data.path });
    const agents: http.Agent[] = [];
    try {
      const created = await post(new http.Agent(), server.url, server.token, "/v1/keys", { parentId: "drain", name: "loops" });
      const keyId = (created.body as { id?: string }).id;
      const outcomes = new Map<string, number>();
      const seen = (outcome: string): void => void outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      let served = 0;
      const loop = async (agent: http.Agent): Promise<void> => {
        for (;;) {
          try {
            const answer = await post(agent, server.url, server.token, "/v1/encrypt", { keyId, keyVersionId: 1, plaintext: "aGk=" });
            if (answer.status === 200) served++;
            else seen(`${answer.status} ${answer.body.message} connection: ${answer.connection}`);
          } catch (err) {
            // ECONNREFUSED once the listener has closed (a balancer takes the call to another server); anything else
            // is a fault.
            seen((err as NodeJS.ErrnoException).code ?? String(err));
            return;
          }
        }
      };
      for (let i = 0; i < 16; i++) agents.push(new http.Agent({ keepAlive: true, maxSockets: 1 }));
      const loops = agents.map(loop);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const exit = server.kill("SIGTERM");
      await Promise.all(loops);
      expect(await exit).toBe(0);
      expect(served).toBeGreaterThan(0);
      // Requests that arrived during the drain, if any, were all refused alike; none was reset. Each loop then met
      // the closed listener.
      const expected = ["503 the server is shutting down connection: close", "ECONNREFUSED"];
      expect([...outcomes.keys()].filter((o) => !expected.includes(o))).toEqual([]);
      expect(outcomes.get("ECONNREFUSED")).toBe(16);
    } finally {
      for (const agent of agents) agent.destroy();
      if (server.running()) await server.kill("SIGKILL");
      data.remove();
    }
  });
});

// A store refusing the task worker's last write at SIGTERM (a full disk, here a trigger) ended the process at once
// with Node's unhandled-rejection print, exit 1, skipping the drain, the audit trail's last batch and the store's
// close (a probe, 2026-11-28). Now the rest of the stop runs, and the failure is logged as the stop's.
describe("a stop whose task worker cannot retire", () => {
  it("still drains, stores the trail's last batch and closes the store, then says the stop failed", async () => {
    const dir = tempDir();
    try {
      const server = await spawnServer({ dataDir: dir.path });
      const key = await fetch(`${server.url}/v1/keys`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
        body: JSON.stringify({ parentId: "stop" }),
      });
      expect(key.status).toBe(200);
      const removeFailure = injectWriteFailure(dir.path, "compute_workers", "DELETE");
      expect(await server.kill("SIGTERM")).toBe(1);
      removeFailure();
      const lines = server.logs().split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line) as { msg: string; err?: { message?: string } });
      expect(lines.find((line) => line.msg === "shutdown failed")?.err?.message).toContain("injected storage failure");
      expect(server.logs()).not.toContain("triggerUncaughtException");
      expect(auditRecords(dir.path).map((r) => r.method)).toContain("kms.v1.KeyManagerService/CreateCryptoKey");
    } finally {
      dir.remove();
    }
  });
});
