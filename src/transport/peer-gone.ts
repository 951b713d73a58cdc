import http2 from "node:http2";

// A peer can go away between any two of our steps: a reset stream, a GOAWAY, a dropped TCP connection. Node then
// throws from the next call that writes (`respond` throws ERR_HTTP2_INVALID_STREAM on a closed stream, which
// once crashed the process from an event handler). Every write to an HTTP/2 stream goes through these, so the
// check is written once and a departed peer is never an error of the server.

// Whether headers can still be sent on the stream.
export function canRespond(stream: http2.ServerHttp2Stream): boolean {
  return !stream.destroyed && !stream.closed && !stream.headersSent && stream.session !== undefined && !stream.session.destroyed;
}

// Sends the response headers; returns false, and drops the stream, when the peer is gone.
export function respondIfPresent(
  stream: http2.ServerHttp2Stream,
  headers: http2.OutgoingHttpHeaders,
  options: http2.ServerStreamResponseOptions,
): boolean {
  if (!canRespond(stream)) return false;
  try {
    stream.respond(headers, options);
    return true;
  } catch {
    // The session went away between the check and the call (nghttp2 reports it only now).
    stream.destroy();
    return false;
  }
}

// Resets the stream with RST_STREAM(NO_ERROR) once the whole response (trailers included) is handed to nghttp2,
// for a request whose body we stopped reading: RFC 9113 section 8.1 lets a server answer before the request is
// complete and then reset the stream, which tells the client to stop sending and releases what was buffered for
// the stream. `destroy` rather than `close(NO_ERROR)`: close waits for the writable side to finish, which did not
// always happen, and each stream left waiting kept its call and buffers for good (found by npm run fuzz).
export function stopReading(stream: http2.ServerHttp2Stream): void {
  if (!stream.destroyed) stream.destroy();
}
