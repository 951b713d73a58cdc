import { randomBytes } from "node:crypto";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { create, toBinary } from "@bufbuild/protobuf";
import { EncryptRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import { frame } from "./raw-grpc.js";

// The two sides of a credential-guessing test: an attacker that posts wrong client secrets to
// POST /public/v2/service_auth from a loopback address of its own, and a legitimate caller whose gRPC Encrypt calls
// are timed one by one.

// 127.0.0.0/8 is all loopback on Linux: a client may bind any address of it, and the server, listening on
// 127.0.0.1, sees that address as the source. Failed authentications are counted per source address.
export const ATTACKER_ADDRESS = "127.0.0.2";

export interface AttackAnswer {
  // performance.now() when the answer was complete.
  at: number;
  status: number;
  headers: Record<string, string>;
  body: string;
}

// One keep-alive HTTP/1.1 connection from the attacker's address that sends prepared requests one at a time and
// parses the answers itself: the attacker's own work stays a few microseconds a request, on a machine where it
// shares the cores with the server it attacks. Connects when first used and again after the server closed it
// (it closes connections that stay silent); a connection lost with a request in flight answers status 0.
class RawConnection {
  private socket: net.Socket | null = null;
  private buffer = Buffer.alloc(0);
  private waiting: ((answer: AttackAnswer) => void) | null = null;

  constructor(
    private readonly port: number,
    private readonly address: string,
  ) {}

  get busy(): boolean {
    return this.waiting !== null;
  }

  // One request at a time: busy from now until its answer has come.
  send(request: Buffer): Promise<AttackAnswer> {
    return new Promise((resolve) => {
      this.waiting = resolve;
      this.connected().write(request);
    });
  }

  private connected(): net.Socket {
    if (this.socket !== null && !this.socket.destroyed) return this.socket;
    const socket = net.connect({ host: "127.0.0.1", port: this.port, localAddress: this.address });
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.parse();
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      this.buffer = Buffer.alloc(0);
      const resolve = this.waiting;
      this.waiting = null;
      resolve?.({ at: performance.now(), status: 0, headers: {}, body: "the connection closed before the answer" });
    });
    this.socket = socket;
    return socket;
  }

  private parse(): void {
    const end = this.buffer.indexOf("\r\n\r\n");
    if (end < 0 || this.waiting === null) return;
    const [statusLine, ...lines] = this.buffer.subarray(0, end).toString("latin1").split("\r\n");
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(":");
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    if (headers["content-length"] === undefined) throw new Error(`an answer without content-length: ${statusLine}`);
    const length = Number(headers["content-length"]);
    if (this.buffer.length < end + 4 + length) return;
    const body = this.buffer.subarray(end + 4, end + 4 + length).toString("utf8");
    this.buffer = this.buffer.subarray(end + 4 + length);
    const resolve = this.waiting;
    this.waiting = null;
    resolve({ at: performance.now(), status: Number(statusLine!.split(" ")[1]), headers, body });
  }

  close(): void {
    this.socket?.destroy();
  }
}

// A client secret of the form the server issues, for the client id, that is not its secret.
export function wrongSecret(clientId: string): object {
  return { client_id: clientId, client_secret: `cpcs.${clientId}.${randomBytes(32).toString("base64url")}` };
}

// Posts wrong client secrets for one client id to POST /public/v2/service_auth from a loopback address of its own
// (ATTACKER_ADDRESS unless told), over a few connections, on a steady schedule.
export class Attacker {
  private readonly connections: RawConnection[];

  constructor(
    private readonly port: number,
    address = ATTACKER_ADDRESS,
    connections = 8,
  ) {
    this.connections = Array.from({ length: connections }, () => new RawConnection(port, address));
  }

  private request(body: string): Buffer {
    return Buffer.from(
      `POST /public/v2/service_auth HTTP/1.1\r\nhost: 127.0.0.1:${this.port}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  }

  // Posts `count` bodies (by default wrong secrets for `clientId`) spread evenly over `durationMs` (0: all at once,
  // as fast as the connections go); resolves with every answer, in the order sent.
  async attack(clientId: string, count: number, durationMs: number, body: () => object = () => wrongSecret(clientId)): Promise<AttackAnswer[]> {
    const requests = Array.from({ length: count }, () => this.request(JSON.stringify(body())));
    const start = performance.now();
    const answers: Promise<AttackAnswer>[] = [];
    const queue: Buffer[] = [];
    const pump = (): void => {
      for (const connection of this.connections) {
        const next = connection.busy ? undefined : queue.shift();
        if (next === undefined) continue;
        answers.push(connection.send(next).then((answer) => (setImmediate(pump), answer)));
      }
    };
    for (let i = 0; i < count; i++) {
      const wait = start + (i * durationMs) / count - performance.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      queue.push(requests[i]!);
      pump();
    }
    while (queue.length > 0) await new Promise((r) => setTimeout(r, 1));
    return Promise.all(answers);
  }

  close(): void {
    for (const connection of this.connections) connection.close();
  }
}

// A gRPC caller on one HTTP/2 connection that times each Encrypt call from the request to the end of its answer.
export class TimedEncrypter {
  private readonly session: http2.ClientHttp2Session;
  private readonly body: Buffer;

  constructor(
    url: string,
    private readonly authorization: string,
    keyId: string,
  ) {
    this.session = http2.connect(url);
    this.body = frame(toBinary(EncryptRequestSchema, create(EncryptRequestSchema, { keyId, keyVersionId: 1, plaintext: new Uint8Array(1024).fill(7) })));
  }

  // One call; resolves with its grpc-status and how long it took in milliseconds.
  call(): Promise<{ status: string; ms: number }> {
    const started = performance.now();
    return new Promise((resolve, reject) => {
      const req = this.session.request({
        ":method": "POST",
        ":path": "/kms.v1.KeyManagerService/Encrypt",
        "content-type": "application/grpc",
        te: "trailers",
        authorization: this.authorization,
      });
      let status = "";
      req.on("response", (h) => (status = String(h["grpc-status"] ?? status)));
      req.on("trailers", (t) => (status = String(t["grpc-status"] ?? status)));
      req.on("data", () => {});
      req.on("end", () => resolve({ status, ms: performance.now() - started }));
      req.on("error", reject);
      req.end(this.body);
    });
  }

  close(): void {
    this.session.close();
  }
}

export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

// One HTTP/1.1 POST from the given loopback address (fetch cannot choose its source address).
export function postFrom(
  localAddress: string,
  url: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; headers: Record<string, string>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: "POST", localAddress, headers: { ...headers, "content-length": String(Buffer.byteLength(body)) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const flat: Record<string, string> = {};
        for (const [name, value] of Object.entries(res.headers)) if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(", ") : value;
        resolve({ status: res.statusCode ?? 0, headers: flat, body: Buffer.concat(chunks) });
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}
