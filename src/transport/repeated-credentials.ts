import { Code } from "@connectrpc/connect";
import { protocolError } from "../errors/protocol-errors.js";
import { requestIdOf } from "../pipeline/call.js";
import { answerUnknownProcedure, rpcRefusalAnswer } from "./connect/unknown-procedure.js";
import type { NodeRequest, NodeResponse } from "./node-types.js";
import { domainOfRequestLine, refusalAnswer } from "./rest/parser-refusals.js";
import type { RouteTable } from "./rest/route-table.js";

// A credential header (Authorization, x-api-key, x-workspace-id) sent more than once. Node keeps the first
// Authorization of a request and drops the others, so a valid token followed by a bogus one was served and the two
// the other way round refused (a probe, 2026-11-28), while a proxy that checks the last one would take the caller for
// someone else; an x-api-key sent twice was joined with ", " on one call path and its first value taken on the
// other. Such a request names no one caller, and is refused, whatever its values, before any surface reads them.
// gRPC metadata may repeat a key, so a gRPC, gRPC-web or Connect caller gets the refusal in its own protocol (a
// status it can read, not an HTTP 400 its library reports as INTERNAL); every other request the JSON Status, or the
// virtualization API's Error document, as the head refusals of request-target.ts.

const CREDENTIAL_NAMES: Record<number, string> = { 1: "the Authorization header", 2: "the x-api-key header", 4: "the x-workspace-id header" };

// What is wrong, or null when each credential header came once at most.
function repeatedCredentials(raw: readonly string[]): string | null {
  let seen = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    // Compared by length first: this runs on every request's head (56 ns for a gRPC call's, bench/README.md).
    const bit =
      name.length === 13 && name.toLowerCase() === "authorization"
        ? 1
        : name.length === 9 && name.toLowerCase() === "x-api-key"
          ? 2
          : name.length === 14 && name.toLowerCase() === "x-workspace-id"
            ? 4
            : 0;
    if (bit === 0) continue;
    if ((seen & bit) !== 0) return `${CREDENTIAL_NAMES[bit]} must be sent once, not several times: the request must name one caller`;
    seen |= bit;
  }
  return null;
}

// For the direct gRPC adapter, which leaves such a stream to the request listener.
export function hasRepeatedCredentials(raw: readonly string[]): boolean {
  return repeatedCredentials(raw) !== null;
}

// Answers the request with the refusal when it repeats a credential header; returns whether it did.
export function refuseRepeatedCredentials(req: NodeRequest, res: NodeResponse, routes: RouteTable): boolean {
  const problem = repeatedCredentials(req.rawHeaders);
  if (problem === null) return false;
  const path = req.url ?? "/";
  const line = { httpMethod: req.method ?? "GET", target: path };
  const rpc = rpcRefusalAnswer(req.headers, () => protocolError(domainOfRequestLine(line, routes), Code.InvalidArgument, problem));
  if (rpc !== null) {
    answerUnknownProcedure(res, rpc);
    return true;
  }
  const given = req.headers["x-request-id"];
  const requestId = requestIdOf(Array.isArray(given) ? given[0] : given);
  const { status, type, body } = refusalAnswer(line, (domain) => protocolError(domain, Code.InvalidArgument, problem), requestId, routes);
  const out = res as { writeHead(status: number, headers: Record<string, string | number>): unknown; end(body: string): unknown };
  const headers: Record<string, string | number> = { "content-type": type, "content-length": Buffer.byteLength(body), "x-request-id": requestId };
  // As the head refusals answer HTTP/1.1 (request-target.ts): whatever else such a sender meant, the connection ends.
  if (req.httpVersionMajor !== 2) headers.connection = "close";
  out.writeHead(status, headers);
  out.end(body);
  return true;
}
