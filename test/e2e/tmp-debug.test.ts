import { it } from "vitest";
import { startServer } from "../support/server.js";
it("debug", async () => {
  const server = await startServer({ env: { LOG_LEVEL: "error" } });
  const r = await fetch(`${server.url}/v1/keys`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${server.token}` }, body: JSON.stringify({ parentId: "ns" }) });
  console.log(r.status, await r.text());
  console.log(server.logs());
  await server.stop();
});
