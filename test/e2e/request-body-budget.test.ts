import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { H2_PREFACE, h2Frame, hpackNamed } from "../support/h2-frames.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// Request bodies are read whole before authentication can refuse them, and nothing bounded how many the server held
// at once: 128 streams of 4 MB with a bad token on one HTTP/2 connection took it to 1.4 GB (a probe, 2026-11-28). The
// server holds MAX_BUFFERED_REQUEST_BYTES of them, all connections together (here 4 MiB, the least it takes), and
// refuses a body past that with UNAVAILABLE REQUEST_BODIES_BUSY, to be retried; a body whole or gone gives its bytes
// back.

const BUDGET = 4 * 1024 * 1024;
const PART = Buffer.alloc(2_500_000, 0x61);

let server: TestServer;
beforeAll(async () => {
  server = await startServer({ env: { MAX_BUFFERED_REQUEST_BYTES: String(BUDGET) } });
});
afterAll(() => server.stop());

const settle = () => new Promise((resolve) => setTimeout(resolve, 300));
// What a promise gives within a moment, or "pending": a body the budget took is still being read, not answered.
const soon = <T>(p: Promise<T>): Promise<T | "pending"> => Promise.race([p, settle().then(() => "pending" as const)]);

// A REST Encrypt whose body is declared at 3 MB and sent in part: it holds its bytes until it is ended or dropped.
function partialRest(): http.ClientRequest {
  const req = http.request(`${server.url}/v1/encrypt`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json", "content-length": 3_000_000 },
  });
  req.on("error", () => {});
  req.write(PART);
  return req;
}

// A Connect Encrypt (binary, unary) whose body is declared at 3 MB and sent in part, as partialRest.
function partialConnect(): http.ClientRequest {
  const req = http.request(`${server.url}/kms.v1.KeyManagerService/Encrypt`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/proto", "content-length": 3_000_000 },
  });
  req.on("error", () => {});
  req.write(PART);
  return req;
}

function answerOf(req: http.ClientRequest): Promise<{ status: number; retryAfter: string | undefined; body: { code?: number; message?: string } }> {
  return new Promise((resolve) => {
    req.on("response", (res) => {
      let text = "";
      res.on("data", (chunk: Buffer) => (text += chunk.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers["retry-after"], body: JSON.parse(text) as { code?: number } }));
    });
  });
}

// A gRPC Encrypt on `session` whose envelope declares `declared` bytes, of which `sent` are written: it holds them
// until it is ended or reset.
function partialGrpc(session: http2.ClientHttp2Session, declared: number, sent: Buffer): http2.ClientHttp2Stream {
  const stream = session.request({ ":method": "POST", ":path": "/kms.v1.KeyManagerService/Encrypt", "content-type": "application/grpc", te: "trailers", authorization: `Bearer ${server.token}` });
  stream.on("error", () => {});
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(declared, 1);
  stream.write(Buffer.concat([prefix, sent]));
  return stream;
}

// "<grpc-status> <grpc-message>", from the trailers or, for a trailers-only answer, the headers.
function statusOf(stream: http2.ClientHttp2Stream): Promise<string> {
  return new Promise((resolve) => {
    let headers: http2.IncomingHttpHeaders = {};
    stream.on("response", (h) => (headers = h));
    stream.on("trailers", (t) => resolve(`${String(t["grpc-status"])} ${decodeURIComponent(String(t["grpc-message"]))}`));
    stream.on("close", () => resolve(`${String(headers["grpc-status"])} ${decodeURIComponent(String(headers["grpc-message"]))}`));
    stream.on("data", () => {});
  });
}

// One partial body taken (still being read), a second refused with `refusal`; once the first is gone, another taken.
async function refusedPastBudgetThenTaken<T>(partial: () => http.ClientRequest, answer: (req: http.ClientRequest) => Promise<T>, refusal: unknown): Promise<void> {
  const first = partial();
  await settle();
  const second = partial();
  expect(await answer(second)).toEqual(refusal);
  second.destroy();
  first.destroy();
  await settle();
  const again = partial();
  expect(await soon(answer(again))).toBe("pending");
  again.destroy();
  await settle();
}

const busyMessage = `the server holds as many request bodies as it may (${BUDGET} bytes in all); retry in a moment`;

describe("the server's budget of request bodies", () => {
  it("refuses a REST body past it with 503 REQUEST_BODIES_BUSY, and takes one again once the first is gone", async () => {
    const first = partialRest();
    await settle();
    const second = partialRest();
    const refused = await answerOf(second);
    expect(refused).toEqual({ status: 503, retryAfter: "1", body: expect.objectContaining({ code: 14, message: busyMessage }) });
    second.destroy();
    first.destroy();
    await settle();
    // The first's bytes were given back: the third is taken (still being read), and the fourth refused as the second.
    const third = partialRest();
    expect(await soon(answerOf(third))).toBe("pending");
    const fourth = partialRest();
    expect((await answerOf(fourth)).status).toBe(503);
    third.destroy();
    fourth.destroy();
    await settle();
    const small = await fetch(`${server.url}/v1/encrypt`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
      body: JSON.stringify({ keyId: "none", plaintext: "eA==" }),
    });
    expect(small.status).toBe(404);
  });

  it("refuses a gRPC body past it with UNAVAILABLE, and gives the bytes of a reset stream back", async () => {
    const session = http2.connect(server.url);
    session.on("error", () => {});
    const grpcCall = (): http2.ClientHttp2Stream => partialGrpc(session, 3_000_000, PART);
    try {
      const first = grpcCall();
      await settle();
      expect(await statusOf(grpcCall())).toBe(`14 ${busyMessage}`);
      first.close(http2.constants.NGHTTP2_CANCEL);
      await settle();
      // The reset stream's bytes were given back: another is taken (still being read), and one more refused.
      const again = grpcCall();
      expect(await soon(statusOf(again))).toBe("pending");
      expect(await statusOf(grpcCall())).toBe(`14 ${busyMessage}`);
      again.close(http2.constants.NGHTTP2_CANCEL);
    } finally {
      session.destroy();
    }
  });

  it("counts a gRPC body joined in a buffer of the pool by that buffer's size, not by the bytes sent so far", async () => {
    // Each body declares 1 MiB in all and sends 600 KB: past half, so it is joined into a buffer of 1 MiB, which it
    // holds whatever else comes. Four hold the 4 MiB budget; counted by bytes sent, six would have fit.
    const session = http2.connect(server.url);
    session.on("error", () => {});
    const partialBody = (): http2.ClientHttp2Stream => partialGrpc(session, 1024 * 1024 - 5, Buffer.alloc(600_000, 0x61));
    try {
      const taken: http2.ClientHttp2Stream[] = [];
      for (let i = 0; i < 4; i++) {
        taken.push(partialBody());
        await settle();
      }
      for (const stream of taken) expect(await soon(statusOf(stream))).toBe("pending");
      expect(await statusOf(partialBody())).toBe(`14 ${busyMessage}`);
      // One reset gives its whole buffer's worth back: another is taken.
      taken[0]!.close(http2.constants.NGHTTP2_CANCEL);
      await settle();
      const again = partialBody();
      expect(await soon(statusOf(again))).toBe("pending");
      for (const stream of [...taken, again]) stream.close(http2.constants.NGHTTP2_CANCEL);
    } finally {
      session.destroy();
    }
  });

  // connect-node reads these bodies itself; the body it reads (counted-body.ts) counts them as they arrive.
  it("refuses a Connect body past it with 503 and the Connect error JSON, and gives the bytes back", async () => {
    await refusedPastBudgetThenTaken(partialConnect, answerOf, { status: 503, retryAfter: "1", body: expect.objectContaining({ code: "unavailable", message: busyMessage }) });
  });

  it("refuses a gRPC-web body past it with UNAVAILABLE and Retry-After, and gives the bytes back", async () => {
    const partialGrpcWeb = (): http.ClientRequest => {
      const req = http.request(`${server.url}/kms.v1.KeyManagerService/Encrypt`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.token}`, "content-type": "application/grpc-web+proto", "x-grpc-web": "1" },
      });
      req.on("error", () => {});
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(3_000_000, 1);
      req.write(Buffer.concat([prefix, PART]));
      return req;
    };
    // gRPC-web's status: in the headers of a trailers-only answer, else in the trailer frame of the body.
    const grpcWebAnswerOf = (req: http.ClientRequest): Promise<{ retryAfter: string | undefined; status: string }> =>
      new Promise((resolve) => {
        req.on("response", (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            const inHeaders = res.headers["grpc-status"];
            const trailer = Buffer.concat(chunks).toString("latin1");
            const status =
              inHeaders !== undefined
                ? `${String(inHeaders)} ${decodeURIComponent(String(res.headers["grpc-message"]))}`
                : `${/grpc-status:\s*(\d+)/.exec(trailer)?.[1] ?? "none"} ${decodeURIComponent(/grpc-message:\s*([^\r\n]*)/.exec(trailer)?.[1] ?? "")}`;
            resolve({ retryAfter: res.headers["retry-after"], status });
          });
        });
      });
    await refusedPastBudgetThenTaken(partialGrpcWeb, grpcWebAnswerOf, { retryAfter: "1", status: `14 ${busyMessage}` });
  });

  // connect-node refused a second message of a server-streaming call without ending the body or letting it go: its
  // bytes stayed counted, and such calls, which need no credentials, filled the budget for good (a probe).
  // A client holding its window at 0 keeps every answer from going out, so its streams never close: their bodies
  // were counted until then, and 64 answered calls held the whole budget for as long as the session lived, every large
  // body of everyone else refused REQUEST_BODIES_BUSY (a probe, 2026-11-28). A body is counted until its call is
  // answered now.
  it("gives back the bytes of an answered gRPC call whose answer cannot go out (a window held at 0)", async () => {
    const head = Buffer.concat([
      hpackNamed(":method", "POST"),
      hpackNamed(":scheme", "http"),
      hpackNamed(":path", "/kms.v1.KeyManagerService/Encrypt"),
      hpackNamed(":authority", "127.0.0.1"),
      hpackNamed("content-type", "application/grpc"),
      hpackNamed("authorization", "Bearer bogus"),
    ]);
    const body = Buffer.alloc(5 + 1_500_000);
    body.writeUInt32BE(1_500_000, 1);
    const socket = net.connect(server.port, "127.0.0.1");
    socket.on("error", () => {});
    socket.on("data", () => {});
    await new Promise((resolve) => socket.once("connect", resolve));
    // SETTINGS_INITIAL_WINDOW_SIZE 0; the server's windows are large enough for both bodies.
    socket.write(Buffer.concat([H2_PREFACE, h2Frame(0x4, 0, 0, Buffer.from([0, 4, 0, 0, 0, 0])), h2Frame(0x4, 0x1, 0, Buffer.alloc(0))]));
    for (const id of [1, 3]) {
      socket.write(h2Frame(0x1, 0x4, id, head));
      for (let at = 0; at < body.length; at += 16_384) socket.write(h2Frame(0x0, at + 16_384 >= body.length ? 0x1 : 0, id, body.subarray(at, at + 16_384)));
    }
    await settle();
    // 3 MB of answered calls, held open by their client; 2.5 MB more is taken, and read until it is whole.
    const session = http2.connect(server.url);
    const taken = partialGrpc(session, PART.length + 1_000, PART);
    expect(await soon(statusOf(taken))).toBe("pending");
    taken.close();
    session.close();
    socket.destroy();
    await settle();
  });

  it("gives back the bytes of a server-streaming call that sent two messages, once its stream closes", async () => {
    const session = http2.connect(server.url);
    session.on("error", () => {});
    const envelope = (message: Buffer): Buffer => {
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(message.length, 1);
      return Buffer.concat([prefix, message]);
    };
    // HealthCheckRequest{service: 100 KB of "a"}: within its limits, so that Connect, not the count, refuses it.
    const service = Buffer.concat([Buffer.from([0x0a, 0xa0, 0x8d, 0x06]), Buffer.alloc(100_000, 0x61)]);
    const twoMessages = Buffer.concat([envelope(Buffer.alloc(0)), envelope(service)]);
    try {
      // 4.4 MB in all, past the 4 MiB budget.
      for (let i = 0; i < 44; i++) {
        const status = await new Promise<string>((resolve) => {
          const stream = session.request({ ":method": "POST", ":path": "/grpc.health.v1.Health/Watch", "content-type": "application/grpc-web+proto" });
          stream.on("error", () => {});
          const chunks: Buffer[] = [];
          stream.on("data", (c: Buffer) => chunks.push(c));
          stream.on("close", () => resolve(/grpc-status:\s*(\d+)/.exec(Buffer.concat(chunks).toString("latin1"))?.[1] ?? "none"));
          stream.end(twoMessages);
        });
        expect(status).toBe("12");
      }
    } finally {
      session.destroy();
    }
    await settle();
    const req = partialConnect();
    expect(await soon(answerOf(req))).toBe("pending");
    req.destroy();
    await settle();
  });
});
