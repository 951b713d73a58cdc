import type { NodeRequest, NodeResponse } from "./node-types.js";

// An HTTP/1.1 request whose body the handler stopped reading (Connect refuses a message over its limit
// mid-body) leaves the rest of that body on the connection. A keep-alive client would send its next request
// after those bytes and the server would read it as body: the call hangs, then fails. So such a response must
// say `Connection: close`. With a declared Content-Length this is known up front; for a chunked body it is known
// only when the response head is written, and Node has no event for that moment, hence the wrapped writeHead.
export function closeConnectionIfBodyUnread(req: NodeRequest, res: NodeResponse, maxBodyBytes: number): void {
  if (req.httpVersionMajor !== 1) return;
  if (Number(req.headers["content-length"]) > maxBodyBytes) {
    res.setHeader("connection", "close");
    return;
  }
  if (req.headers["transfer-encoding"] === undefined) return;
  const writeHead = res.writeHead;
  res.writeHead = function (this: NodeResponse, ...args: Parameters<NodeResponse["writeHead"]>) {
    if (!req.complete) this.setHeader("connection", "close");
    return writeHead.apply(this, args);
  } as NodeResponse["writeHead"];
}
