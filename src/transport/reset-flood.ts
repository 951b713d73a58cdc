import http2 from "node:http2";

// Rapid reset (CVE-2023-44487): a client opens streams and resets them at once, so that the server pays for
// every new stream while the client's concurrency limit never fills. nghttp2 cuts a session after a burst of
// 1,000 such resets, which still costs this server a few hundred milliseconds of one core per session. A
// session whose peer aborts more streams than this in one second is sent GOAWAY (ENHANCE_YOUR_CALM) and
// dropped; a client that cancels calls now and then never comes near it.
const MAX_PEER_RESETS_PER_SECOND = 100;

// How long a session cut for a flood has to read its GOAWAY before it is destroyed.
const GOAWAY_GRACE_MS = 1_000;

const RESETS = Symbol("cloudplane.peerResets");

interface ResetWindow {
  startedAt: number;
  count: number;
  // The session was sent GOAWAY and is to be destroyed.
  cut: boolean;
}

type CountedSession = http2.Http2Session & { [RESETS]?: ResetWindow };

const SESSION = Symbol("cloudplane.session");

const SERVER_RESET = Symbol("cloudplane.serverReset");

type WatchedStream = http2.ServerHttp2Stream & { [SESSION]?: CountedSession; [SERVER_RESET]?: true };

// A stream closed with an error code that this server did not send was reset by the peer, whether before or
// after our answer (a client that resets at once may already have an answer on its way); so was one closed with
// NO_ERROR before our answer began: a peer that reset its streams with code 0 was never counted, and was cut only
// by nghttp2's own limit, after about 1,000 (a probe, 2026-11-28).
function onClosed(this: WatchedStream): void {
  if (this[SERVER_RESET] === true || (this.rstCode === http2.constants.NGHTTP2_NO_ERROR && this.headersSent)) return;
  const session = this[SESSION];
  if (session !== undefined) count(session);
}

function count(session: CountedSession): void {
  if (session.destroyed) return;
  const now = performance.now();
  let window = session[RESETS];
  if (window?.cut === true) return;
  if (window === undefined || now - window.startedAt > 1_000) window = session[RESETS] = { startedAt: now, count: 0, cut: false };
  if (++window.count > MAX_PEER_RESETS_PER_SECOND) {
    window.cut = true;
    session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    // Not destroyed inside the read it is in: a stream's close is announced from inside nghttp2's callbacks, and a
    // session destroyed there made Node allocate without end (RSS up 400 MB a second, std::bad_alloc at a 32 GiB
    // allocation; a probe, 2026-11-28), with the GOAWAY never sent. Nor at once after it: the peer, still sending,
    // then met a closed socket, and a TCP reset took the GOAWAY with it (1 session in about 150 in CI, 2026-11-28,
    // seen with tcpdump). The peer is given GOAWAY_GRACE_MS to read it, as Go's HTTP/2 server gives its peers a
    // second; a client told ENHANCE_YOUR_CALM closes the connection itself, and meanwhile nghttp2 serves no stream
    // the peer opens after the GOAWAY.
    setTimeout(destroy, GOAWAY_GRACE_MS, session).unref();
  }
}

function destroy(session: http2.Http2Session): void {
  if (!session.destroyed) session.destroy();
}

// Node announces a stream on the next tick after its headers: a stream reset in the same read is closed
// already, and has let go of its session, by then.
function onStream(this: CountedSession, stream: WatchedStream): void {
  if (stream.destroyed || stream.closed) {
    // Whatever its code: nothing had been answered.
    count(this);
    return;
  }
  stream[SESSION] = this;
  stream.on("close", onClosed);
}

// Marks a stream that this server is about to reset itself.
export function markServerReset(stream: http2.ServerHttp2Stream): void {
  (stream as WatchedStream)[SERVER_RESET] = true;
}

// Counts the streams of one session that its peer resets.
export function countPeerResets(session: http2.Http2Session): void {
  session.on("stream", onStream);
}
