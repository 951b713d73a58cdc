import { afterAll, describe, expect, it } from "vitest";
import { spawnServer } from "../support/server.js";
import type { SpawnedServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";

// Key creations made at once share commits (src/storage/sqlite/group-commit.ts). That must not weaken durability:
// a server killed with SIGKILL in the middle of 64 concurrent creators keeps every key it acknowledged.
describe("SIGKILL during 64 concurrent CreateCryptoKey callers", () => {
  const dir = tempDir();
  let server: SpawnedServer | undefined;

  afterAll(async () => {
    await server?.kill("SIGKILL");
    dir.remove();
  });

  it("keeps every acknowledged key", async () => {
    const env = { MASTER_KEY: "" };
    server = await spawnServer({ dataDir: dir.path, env });
    const { url, token } = server;
    const acknowledged: { id: string; name: string }[] = [];
    let unanswered = 0;
    // Each creator calls until a call of its own gets no answer. Stopping at a flag set with the kill was a race: the
    // server could have answered every call in flight (one group commit answers them all at once) before the test
    // process read the answers, and the kill then found none in flight.
    const creator = async (c: number): Promise<void> => {
      for (let i = 0; ; i++) {
        const name = `c${c}-k${i}`;
        let res: Response;
        try {
          res = await fetch(`${url}/v1/keys`, {
            method: "POST",
            headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
            body: JSON.stringify({ parentId: "durable", name }),
          });
        } catch {
          unanswered++;
          return;
        }
        // An answer the kill cut short is not an acknowledgement.
        let body: { id?: string };
        try {
          body = (await res.json()) as { id?: string };
        } catch {
          unanswered++;
          return;
        }
        expect(res.status).toBe(200);
        acknowledged.push({ id: body.id!, name });
      }
    };
    const creators = Array.from({ length: 64 }, (_, c) => creator(c));
    // Kill while the creators are still going, once enough keys were acknowledged that batches were formed.
    while (acknowledged.length < 400) await new Promise((r) => setTimeout(r, 20));
    await server.kill("SIGKILL");
    await Promise.all(creators);
    expect(acknowledged.length).toBeGreaterThanOrEqual(400);
    // Every creator ended on a call the kill cut off; the calls answered before it are all acknowledged above.
    expect(unanswered).toBe(64);

    server = await spawnServer({ dataDir: dir.path, env });
    for (const key of acknowledged) {
      const res = await fetch(`${server.url}/v1/keys/${key.id}`, { headers: { authorization: `Bearer ${server.token}` } });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { name: string }).name).toBe(key.name);
    }
  }, 60_000);
});
