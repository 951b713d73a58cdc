import http2 from "node:http2";
import { brotliDecompressSync, gunzipSync, inflateSync } from "node:zlib";

// The two clients the properties send with: Node's HTTP/2 client, raw (exact headers, any method, the trailers),
// and fetch over HTTP/1.1. Each call is bounded in time and reports what came back, never throws.

export type Headers1 = Record<string, string>;

export type Answer =
  | { kind: "answer"; status: number; headers: Headers1; trailers: Headers1; body: Buffer }
  // The stream or connection ended without response headers (an HTTP/2 reset, a socket closed).
  | { kind: "reset"; detail: string }
  // No answer within the call timeout: nothing at all, or a head whose body did not end (said in `detail`, so that
  // a hang that does not recur says at least which side stopped).
  | { kind: "hung"; detail: string }
  // The client itself would not send the request (a header or path it finds invalid); the server saw nothing.
  | { kind: "not sent"; detail: string };

function flatten(headers: http2.IncomingHttpHeaders): Headers1 {
  const out: Headers1 = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) out[name] = Array.isArray(value) ? value.join(", ") : String(value);
  return out;
}

// One HTTP/2 session, reopened when the server has closed it (GOAWAY, idle timeout, a session error).
export class H2Client {
  private session: http2.ClientHttp2Session | null = null;

  constructor(
    private readonly url: string,
    private readonly timeoutMs: number,
  ) {}

  private current(): http2.ClientHttp2Session {
    const s = this.session;
    if (s !== null && !s.closed && !s.destroyed) return s;
    // Node's client counts the unsent part of a body the server refused without reading (a 4 MiB upload answered
    // 404 at once) against its session memory for a while; at its 10 MB default, a few such uploads in a row
    // make the client itself reset every later stream with ENHANCE_YOUR_CALM.
    const fresh = http2.connect(this.url, { maxSessionMemory: 1024 });
    fresh.on("error", () => {});
    fresh.on("goaway", () => {
      if (this.session === fresh) this.session = null;
    });
    this.session = fresh;
    return fresh;
  }

  request(headers: http2.OutgoingHttpHeaders, body: Buffer): Promise<Answer> {
    return new Promise((resolve) => {
      let stream: http2.ClientHttp2Stream;
      try {
        // Node ends GET, HEAD and DELETE streams at once unless told otherwise; these may carry a body.
        stream = this.current().request(headers, { endStream: false });
      } catch (err) {
        resolve({ kind: "not sent", detail: String(err) });
        return;
      }
      let response: http2.IncomingHttpHeaders | null = null;
      let trailers: http2.IncomingHttpHeaders = {};
      let hung = false;
      const chunks: Buffer[] = [];
      const timer = setTimeout(() => {
        hung = true;
        stream.close(http2.constants.NGHTTP2_CANCEL);
      }, this.timeoutMs);
      stream.on("response", (h) => (response = h));
      stream.on("trailers", (t) => (trailers = t));
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("error", () => {});
      stream.on("close", () => {
        clearTimeout(timer);
        if (hung) resolve({ kind: "hung", detail: hangDetail(response === null ? null : Number(response[":status"]), chunks) });
        else if (response === null) resolve({ kind: "reset", detail: `RST_STREAM ${stream.rstCode}` });
        else {
          const h = flatten(response);
          resolve({ kind: "answer", status: Number(h[":status"]), headers: h, trailers: flatten(trailers), body: decoded(h["content-encoding"], Buffer.concat(chunks)) });
        }
      });
      stream.end(body);
    });
  }

  close(): void {
    this.session?.close();
    this.session = null;
  }
}

// The body as fetch would give it: decompressed when the answer says it is (a Connect answer to a compressed
// request is compressed the same way). Left as it is when it does not decompress.
function decoded(encoding: string | undefined, body: Buffer): Buffer {
  try {
    if (encoding === "gzip") return gunzipSync(body);
    if (encoding === "br") return brotliDecompressSync(body);
    if (encoding === "deflate") return inflateSync(body);
  } catch {
    // The verdict sees the raw bytes, which are no JSON.
  }
  return body;
}

// fetch over HTTP/1.1 (Node's undici, keep-alive). Methods and header values fetch refuses are "not sent".
export async function fetchAnswer(url: string, method: string, headers: Headers1, body: Buffer | undefined, timeoutMs: number): Promise<Answer> {
  let request: Request;
  try {
    request = new Request(url, { method, headers, body: body === undefined || body.length === 0 ? undefined : new Uint8Array(body) });
  } catch (err) {
    return { kind: "not sent", detail: String(err) };
  }
  const signal = AbortSignal.timeout(timeoutMs);
  let status: number | null = null;
  const chunks: Buffer[] = [];
  try {
    const res = await fetch(request, { signal });
    status = res.status;
    // Read a chunk at a time, so that a hang in the body can say how much of it came.
    if (res.body !== null) for await (const chunk of res.body) chunks.push(Buffer.from(chunk));
    const out: Headers1 = {};
    res.headers.forEach((value, name) => (out[name] = value));
    return { kind: "answer", status: res.status, headers: out, trailers: {}, body: Buffer.concat(chunks) };
  } catch (err) {
    if (signal.aborted) return { kind: "hung", detail: hangDetail(status, chunks) };
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return { kind: "reset", detail: `${String(err)}${cause === undefined ? "" : `: ${cause.code ?? ""} ${cause.message ?? ""}`}` };
  }
}

function hangDetail(status: number | null, chunks: readonly Buffer[]): string {
  if (status === null) return "no response head";
  const bytes = chunks.reduce((n, c) => n + c.length, 0);
  return `HTTP ${status} came, then the body stopped after ${bytes} bytes`;
}

export function describeAnswer(answer: Answer): string {
  if (answer.kind !== "answer") return `${answer.kind}${"detail" in answer ? ` (${answer.detail})` : ""}`;
  const shown = { ...answer.headers, ...answer.trailers };
  delete shown["date"];
  return `HTTP ${answer.status} ${JSON.stringify(shown)} body(${answer.body.length})=${answer.body.subarray(0, 300).toString("latin1")}`;
}
