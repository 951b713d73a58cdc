import { tooManyOpenStreams } from "../errors/protocol-errors.js";
import { answerUnknownProcedure, rpcRefusalAnswer } from "./connect/unknown-procedure.js";
import type { NodeRequest, NodeResponse } from "./node-types.js";

// How many calls open by design (health Watch, streaming reflection) the server holds. They are exempt from the
// idle and request timeouts, need no credentials, and cost about 55 KB of heap each: 10,240 of them took 514 MB, and
// a server with a 256 MB heap died of them (a probe, 2026-11-28), where the only bound was MAX_CONNECTIONS times
// HTTP2_MAX_STREAMS. A balancer or an operator's tool needs a few; past the limits a new one is refused with
// RESOURCE_EXHAUSTED in its protocol, before any handler, and the calls already open are kept.
export interface LongLivedLimits {
  maxLongLivedCalls: number;
  maxLongLivedCallsPerConnection: number;
}

export class LongLivedCalls {
  private open = 0;
  // By connection: an HTTP/2 session, or an HTTP/1.1 socket.
  private readonly byConnection = new WeakMap<object, number>();

  constructor(private readonly limits: LongLivedLimits) {}

  // Counts the call until its response closes and returns true; or answers the refusal and returns false.
  admit(req: NodeRequest, res: NodeResponse): boolean {
    const connection: object = "stream" in req ? (req.stream.session ?? req.stream) : req.socket;
    const here = this.byConnection.get(connection) ?? 0;
    const { maxLongLivedCalls, maxLongLivedCallsPerConnection } = this.limits;
    if (this.open >= maxLongLivedCalls || here >= maxLongLivedCallsPerConnection) {
      const answer = rpcRefusalAnswer(req.headers, () => tooManyOpenStreams(maxLongLivedCalls, maxLongLivedCallsPerConnection));
      // Not one of the RPC protocols: Connect's router refuses it as it would anyway, and it stays open for no one.
      if (answer === null) return true;
      answerUnknownProcedure(res, answer);
      return false;
    }
    this.open++;
    this.byConnection.set(connection, here + 1);
    res.once("close", () => {
      this.open--;
      const left = (this.byConnection.get(connection) ?? 1) - 1;
      if (left > 0) this.byConnection.set(connection, left);
      else this.byConnection.delete(connection);
    });
    return true;
  }
}
