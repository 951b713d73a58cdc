import http from "node:http";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { adminAuth } from "../support/credentials.js";
import { http2Request } from "../support/raw-http2.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";
import { tempDir } from "../support/temp-dir.js";
import { VDC, writeTestCatalog } from "./compute-helpers.js";

// HEAD on every REST route that has GET (RFC 9110 9.1: general-purpose servers MUST support GET and HEAD): the
// GET's call (authenticated, rate-limited as a GET, audited), its status and headers with the Content-Length of
// the body it would send, and no body (docs/callers.md). Both call paths.

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

function h1(server: TestServer, method: string, path: string, headers: Record<string, string> = adminAuth(server.url)): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${server.url}${path}`, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on("error", reject);
    req.end();
  });
}

async function h2(server: TestServer, method: string, path: string): Promise<Answer> {
  const answer = await http2Request(server.url, { ":method": method, ":path": path, ...adminAuth(server.url) });
  const { ":status": _status, ...headers } = answer.headers;
  return { status: answer.status, headers, body: Buffer.from(answer.body) };
}

// What differs between two answers by nature.
function comparable(headers: Answer["headers"]): Answer["headers"] {
  const { date: _date, "x-request-id": _id, "x-ratelimit-remaining": _left, "x-ratelimit-reset": _reset, ...rest } = headers;
  return rest;
}

describe.each(["direct", "connect"] as const)("HEAD on REST routes, CALL_PATH=%s", (callPath) => {
  let server: TestServer;
  let keyId: string;
  const catalog = tempDir();

  beforeAll(async () => {
    server = await startServer({ env: { CALL_PATH: callPath, CATALOG_FILE: writeTestCatalog(catalog.path), RATE_LIMIT_GET_PER_MINUTE: "4" } });
    const res = await fetch(`${server.url}/v1/keys`, {
      method: "POST",
      headers: { "content-type": "application/json", ...adminAuth(server.url) },
      body: JSON.stringify({ parentId: "head", name: "k" }),
    });
    keyId = ((await res.json()) as { id: string }).id;
  });
  afterAll(async () => {
    await server.stop();
    catalog.remove();
  });

  test.each([
    ["HTTP/1.1", h1],
    ["HTTP/2", h2],
  ] as const)("%s: the GET's status and headers, its body's length, no body", async (_name, send) => {
    const get = await send(server, "GET", `/v1/keys/${keyId}`);
    const head = await send(server, "HEAD", `/v1/keys/${keyId}`);
    expect(get.status).toBe(200);
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
    expect(head.headers["content-type"]).toBe("application/json");
    expect(head.headers["content-length"]).toBe(String(get.body.length));
    expect(head.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    expect(comparable(head.headers)).toEqual(comparable({ ...get.headers, "content-length": String(get.body.length) }));
  });

  test("a refusal of the GET is the HEAD's, without its body", async () => {
    for (const [path, headers, status] of [
      ["/v1/keys/no-such-key", adminAuth(server.url), 404],
      [`/v1/keys/${keyId}`, {}, 401],
      ["/v1/nothing-here", adminAuth(server.url), 404],
    ] as const) {
      const get = await h1(server, "GET", path, headers);
      const head = await h1(server, "HEAD", path, headers);
      expect([get.status, head.status]).toEqual([status, status]);
      expect(head.body.length).toBe(0);
      expect(head.headers["content-type"]).toBe("application/json");
      // The message of a refusal names the HTTP method it was given: only the length is compared.
      expect(Number(head.headers["content-length"])).toBeGreaterThan(0);
    }
  });

  test("HEAD is allowed wherever GET is, and listed in Allow", async () => {
    const put = await h1(server, "PUT", `/v1/keys/${keyId}`);
    expect(put.status).toBe(405);
    expect(put.headers.allow).toBe("DELETE, GET, HEAD, PATCH");
    const head = await h1(server, "HEAD", "/v1/encrypt");
    expect(head.status).toBe(405);
    expect(head.headers.allow).toBe("POST");
    expect(head.body.length).toBe(0);
    const versions = await h1(server, "PUT", "/v1/keys/x/versions");
    expect(versions.headers.allow).toBe("GET, HEAD, POST");
  });

  // RATE_LIMIT_GET_PER_MINUTE=4 on the compute platform's routes: a HEAD is counted as the GET it is.
  test("a HEAD is rate-limited as a GET", async () => {
    const path = `/cluster/v1/${VDC}/tasks`;
    const answers = [await h1(server, "GET", path)];
    for (let i = 0; i < 4; i++) answers.push(await h1(server, "HEAD", path));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 429]);
    expect(answers.map((a) => a.headers["x-ratelimit-remaining"])).toEqual(["3", "2", "1", "0", "0"]);
    const refused = answers[4]!;
    expect(refused.headers["x-ratelimit-limit"]).toBe("4");
    expect(Number(refused.headers["retry-after"])).toBeGreaterThan(0);
    expect(refused.body.length).toBe(0);
  });
});
