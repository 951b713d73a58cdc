import type http from "node:http";
import type http2 from "node:http2";
import type { NodeRequest, NodeResponse } from "./node-types.js";
import { stopReading } from "./peer-gone.js";

// A request whose body the handler stopped reading (Connect refuses a message over its limit mid-body; REST
// refuses a body over its limit) must not keep its connection or stream busy with the rest of that body.
export function releaseUnreadBody(req: NodeRequest, res: NodeResponse, maxBodyBytes: number): void {
  if (req.httpVersionMajor === 1) releaseHttp1Body(req, res, maxBodyBytes);
  else resetStreamIfBodyUnread(req, res);
}

// HTTP/1.1: a keep-alive client would send its next request after the unread bytes and the server would read
// it as body: the call hangs, then fails. So a response to a body over the limit must say `Connection: close`.
// With a declared Content-Length this is known up front; for a chunked body it is known only when the response
// head is written, and Node has no event for that moment, hence the wrapped writeHead.
// A body within the limit is read to its end and dropped once the answer is out instead, so that the connection
// serves its next request. Node does that itself only for a body nobody started to read: one the handler stopped
// reading partway (Connect refuses a gRPC-web message whose envelope declares more than the limit after its first
// bytes) stayed unread, its socket stopped by backpressure, and the next request on the connection went
// unanswered until the request timeout (408 after 30 s; found by the property runs, docs/robustness.md).
function releaseHttp1Body(req: NodeRequest, res: NodeResponse, maxBodyBytes: number): void {
  const declared = req.headers["content-length"];
  if (Number(declared) > maxBodyBytes) {
    res.setHeader("connection", "close");
    return;
  }
  const chunked = req.headers["transfer-encoding"] !== undefined;
  if (!chunked && !(Number(declared) > 0)) return;
  // `on`, not `once`: a response finishes once, and `once` would wrap the listener in a new function per call.
  (res as http.ServerResponse).on("finish", dropRestOfBody);
  if (!chunked) return;
  const writeHead = res.writeHead;
  res.writeHead = function (this: NodeResponse, ...args: Parameters<NodeResponse["writeHead"]>) {
    if (!req.complete) this.setHeader("connection", "close");
    return writeHead.apply(this, args);
  } as NodeResponse["writeHead"];
}

// Whoever was reading has stopped (its listeners go, so that the request flows); what is left is read and
// dropped. A response that said `Connection: close` ends with the connection, whose reading Node stops itself.
function dropRestOfBody(this: http.ServerResponse): void {
  const req = this.req;
  if (req.readableEnded || req.destroyed || this.getHeader("connection") === "close") return;
  req.removeAllListeners("readable");
  req.removeAllListeners("data");
  req.resume();
}

// HTTP/2: the stream stays open, its buffers full, for as long as the client goes on sending (each such stream
// held about 0.65 MB). Node's compatibility layer asks for trailers once the response body is written, and it
// sends them from its own listener, which runs before this one; the reset waits one turn so that it follows the
// trailers on the wire instead of discarding them.
// A response that has no content (to HEAD, or 204, 205, 304: RFC 9110 sections 9.3.2, 15.3.5, 15.3.6, 15.4.5)
// goes out as headers with END_STREAM: Node then never asks for trailers (nor, for HEAD, finishes the stream's
// writable side), and such a stream stayed until the request timeout. Its reset follows the headers instead, one
// turn after writeHead, through which the compatibility layer sends every response head (write and end call it).
const NO_CONTENT_STATUSES = new Set([204, 205, 304]);

function resetStreamIfBodyUnread(req: NodeRequest, res: NodeResponse): void {
  const stream = (res as { stream: http2.ServerHttp2Stream }).stream;
  stream.on("wantTrailers", resetIfBodyUnread);
  // A request without a body (END_STREAM on its headers) has nothing left unread.
  if (stream.endAfterHeaders) return;
  const writeHead = res.writeHead;
  res.writeHead = function (this: NodeResponse, ...args: Parameters<NodeResponse["writeHead"]>) {
    const written = writeHead.apply(this, args);
    if (req.method === "HEAD" || NO_CONTENT_STATUSES.has(this.statusCode)) resetIfBodyUnread.call(stream);
    return written;
  } as NodeResponse["writeHead"];
}

function resetIfBodyUnread(this: http2.ServerHttp2Stream): void {
  if (!this.readableEnded) setImmediate(stopReading, this);
}
