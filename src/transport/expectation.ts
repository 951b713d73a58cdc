import type { NodeRequest, NodeResponse } from "./node-types.js";

// Node's HTTP/1.1 server takes 100-continue as a member of Expect, case-insensitively (its continueExpression);
// its HTTP/2 compatibility layer only the exact value `100-continue`.
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i;

// The "checkExpectation" listener of every server: a request whose Expect names something else than 100-continue
// is served as if it had none. Node's default was a bare 417 (no body, no request id, no CORS headers) on every
// surface, while the direct gRPC adapter, which reads HTTP/2 streams before Node's compatibility layer, served
// such a call: the gRPC call paths disagreed. RFC 9110 10.1.1 lets a server ignore an expectation it does not know
// (417 is a MAY); 100-continue is the only one defined, and a caller sending another one wants its request served.
// A 100-continue Node's HTTP/2 layer missed (`100-Continue`) is answered as HTTP/1.1 answers it.
export function serveDespiteExpectation(serve: (req: NodeRequest, res: NodeResponse) => void): (req: NodeRequest, res: NodeResponse) => void {
  return (req, res) => {
    if (CONTINUE.test(String(req.headers.expect))) res.writeContinue();
    serve(req, res);
  };
}
