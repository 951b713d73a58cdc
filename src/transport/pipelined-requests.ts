import type http from "node:http";
import type net from "node:net";

// HTTP/1.1 pipelining (RFC 9112 section 9.3): a client may send requests without waiting for the answers, which go
// back in order. Node parses every request of a read and calls the request listener for each at once, and the
// answers of those behind the first are kept whole in memory until their turn: 60 pipelined lists of 3.4 MB on one
// socket whose client read nothing held 550 MB (a probe of 82d22ee). Here a pipelined request is served only when
// the answers before it are out, as Go's net/http serves them, so that a connection holds at most the answer being
// written (bounded in its turn by src/transport/unsent-output.ts), and no work is done for a client that does not
// read. An ordinary keep-alive client, which sends its next request after the answer, waits for nothing.

// Requests of one connection waiting for their turn, past which the connection is read no further until the
// queue is down to half (TCP then slows the client down). Each waiting request costs its parsed head and up to
// 16 KiB of body read ahead; a client that sends its next requests while its answers are still being written
// rarely has more than a few waiting. Node itself stops reading a socket whose waiting answers hold 16 KiB, a
// check that serving in turn defeats (the waiting answers hold nothing), so this takes its place.
export const MAX_WAITING_REQUESTS = 32;

const WAITING = Symbol("cloudplane.waitingRequests");
const PAUSED = Symbol("cloudplane.pausedForPipelining");

// `_paused` is Node's own mark of a socket it stopped reading for pipelining: it pauses the parser after the read
// in progress and resumes both on the socket's next drain. Set the same way here, so that Node and this module
// agree on what a paused socket is.
type WatchedSocket = net.Socket & { [WAITING]?: number; [PAUSED]?: true; _paused?: boolean; parser?: { resume(): void } | null };

// Called with the request and its response when its turn comes; the response has its socket then.
export type Serve = (req: http.IncomingMessage, res: http.ServerResponse) => void;

function turnCame(socket: WatchedSocket, req: http.IncomingMessage, res: http.ServerResponse, serve: Serve): void {
  const waiting = (socket[WAITING] ?? 1) - 1;
  socket[WAITING] = waiting;
  if (socket[PAUSED] === true && waiting <= MAX_WAITING_REQUESTS / 2) {
    socket[PAUSED] = undefined;
    if (socket._paused === true && !socket.destroyed) {
      socket._paused = false;
      socket.parser?.resume();
      socket.resume();
    }
  }
  serve(req, res);
}

// Returns true when the request waits for the answers before it (it is served through `serve` later), false when
// it can be served now. An HTTP/1.1 response has a socket from the start unless an earlier one still has it: one
// property read for every request that is not pipelined.
export function waitsForTurn(req: http.IncomingMessage, res: http.ServerResponse, serve: Serve): boolean {
  if (res.socket !== null) return false;
  const socket = req.socket as WatchedSocket;
  const waiting = (socket[WAITING] ?? 0) + 1;
  socket[WAITING] = waiting;
  if (waiting >= MAX_WAITING_REQUESTS && socket._paused !== true) {
    socket[PAUSED] = true;
    socket._paused = true;
    socket.pause();
  }
  // Node gives a waiting response its socket (and emits "socket") when the answer before it is finished; if the
  // connection closes first, the request is never served and nothing was started for it.
  res.once("socket", () => turnCame(socket, req, res, serve));
  return true;
}
