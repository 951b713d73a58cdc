import http2 from "node:http2";
import type { FairTurns } from "./fair-turns.js";
import { markServerReset } from "./reset-flood.js";

// A request must arrive whole within the request timeout: a client that sends headers and then a body slowly or
// never would otherwise hold a stream, its buffers and a handler forever. HTTP/1.1 has this from Node
// (`requestTimeout`, set in server.ts); this is the same for every HTTP/2 stream, whatever its protocol. The
// timer starts with the stream and stops when the request's last byte arrives or the stream closes; a late
// request is reset with CANCEL (RFC 9113 section 8.1 allows a server to do so when it no longer wants the
// rest), which frees the stream at once. Calls that stay open by design (streaming reflection) are exempt.

const TIMER = Symbol("cloudplane.requestTimer");

type TimedStream = http2.ServerHttp2Stream & { [TIMER]?: NodeJS.Timeout };

// Streams opened together time out together: they are reset within a time budget per turn (fair-turns.ts), so
// that a hundred of them, each ending a call, do not hold up every other connection.
function expire(stream: TimedStream, turns: FairTurns): void {
  stream[TIMER] = undefined;
  turns.run(() => reset(stream));
}

function reset(stream: TimedStream): void {
  if (stream.destroyed || stream.closed || stream.readableEnded) return;
  markServerReset(stream);
  stream.close(http2.constants.NGHTTP2_CANCEL);
}

// Shared listeners, not closures: this runs for every stream, the fast path's included.
function stop(this: TimedStream): void {
  const timer = this[TIMER];
  if (timer === undefined) return;
  clearTimeout(timer);
  this[TIMER] = undefined;
  this.off("end", stop);
  this.off("close", stop);
}

export function limitRequestTime(stream: http2.ServerHttp2Stream, timeoutMs: number, turns: FairTurns): void {
  // A request without a body (END_STREAM on its headers) is complete already.
  if (stream.readableEnded || stream.endAfterHeaders) return;
  const timed = stream as TimedStream;
  timed[TIMER] = setTimeout(expire, timeoutMs, timed, turns);
  stream.on("end", stop);
  stream.on("close", stop);
}
