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

// Shared listeners, not closures: this runs for every stream still arriving at the end of its first turn.
function stop(this: TimedStream): void {
  const timer = this[TIMER];
  if (timer === undefined) return;
  clearTimeout(timer);
  this[TIMER] = undefined;
  this.off("end", stop);
  this.off("close", stop);
}

function isWhole(stream: http2.ServerHttp2Stream): boolean {
  return stream.readableEnded || stream.closed || stream.destroyed;
}

// Most requests are whole before the turn of the event loop that opened their stream is over (a unary call's
// headers and message come in one read), and a timer set and cleared, with its two listeners, for each of them
// cost about 2% of a 1 KiB Encrypt (bench/README.md). So an opened stream is only noted, and at the end of the
// turn (setImmediate) a timer is armed for each one still arriving, due when it would have been had it been set
// when the stream opened.
export class RequestTimeouts {
  private opened: http2.ServerHttp2Stream[] = [];
  private openedAt = 0;

  constructor(
    private readonly timeoutMs: number,
    private readonly turns: FairTurns,
  ) {}

  limit(stream: http2.ServerHttp2Stream): void {
    // A request without a body (END_STREAM on its headers) is complete already.
    if (stream.readableEnded || stream.endAfterHeaders) return;
    // The streams of one turn opened within it: they are all timed from its first, which only makes them due a
    // little (the length of the turn) sooner.
    if (this.opened.push(stream) === 1) {
      this.openedAt = performance.now();
      setImmediate(this.arm);
    }
  }

  private readonly arm = (): void => {
    const opened = this.opened;
    this.opened = [];
    const delay = Math.max(0, this.openedAt + this.timeoutMs - performance.now());
    for (const stream of opened) {
      if (isWhole(stream)) continue;
      const timed = stream as TimedStream;
      timed[TIMER] = setTimeout(expire, delay, timed, this.turns);
      stream.on("end", stop);
      stream.on("close", stop);
    }
  };
}
