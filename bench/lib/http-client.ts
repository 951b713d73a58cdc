import http from "node:http";
import http2 from "node:http2";

// One POST over HTTP/1.1 or h2c, the body read whole: for the checks of what h2load cannot see in the REST,
// Connect and gRPC-web answers (their bytes), before and after each load.

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export interface Post {
  port: number;
  path: string;
  headers: Record<string, string>;
  body: Uint8Array;
  h1: boolean;
}

const TIMEOUT_MS = 10_000;

export function post(p: Post): Promise<Reply> {
  return p.h1 ? postH1(p) : postH2(p);
}

function postH1(p: Post): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port: p.port, path: p.path, method: "POST", headers: { ...p.headers, "content-length": String(p.body.length) }, agent: false, timeout: TIMEOUT_MS },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`POST ${p.path}: no answer within ${TIMEOUT_MS} ms`)));
    req.on("error", reject);
    req.end(p.body);
  });
}

function postH2(p: Post): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${p.port}`);
    const fail = (err: Error): void => {
      session.destroy();
      reject(err);
    };
    session.on("error", fail);
    session.setTimeout(TIMEOUT_MS, () => fail(new Error(`POST ${p.path}: no answer within ${TIMEOUT_MS} ms`)));
    const req = session.request({ ":method": "POST", ":path": p.path, ...p.headers });
    let headers: Reply["headers"] = {};
    req.on("response", (h) => (headers = h));
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      session.close();
      resolve({ status: Number(headers[":status"] ?? 0), headers, body: Buffer.concat(chunks) });
    });
    req.on("error", fail);
    req.end(p.body);
  });
}
