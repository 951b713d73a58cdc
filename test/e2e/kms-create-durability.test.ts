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
    let killed = false;
    const creator = async (c: number): Promise<void> => {
      for (let i = 0; !killed; i++) {
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
    const killing = server.kill("SIGKILL");
    killed = true;
    await killing;
    await Promise.all(creators);
    expect(acknowledged.length).toBeGreaterThanOrEqual(400);
    // Creators in flight at the kill got no answer; most of them were waiting for a commit.
    expect(unanswered).toBeGreaterThan(0);

    server = await spawnServer({ dataDir: dir.path, env });
    for (const key of acknowledged) {
      const res = await fetch(`${server.url}/v1/keys/${key.id}`, { headers: { authorization: `Bearer ${server.token}` } });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { name: string }).name).toBe(key.name);
    }
  }, 60_000);
});
