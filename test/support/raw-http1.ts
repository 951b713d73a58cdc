import net from "node:net";

// One HTTP/1.1 request written as exact bytes on a plain TCP socket, for what fetch and Node's client will not send:
// a head too large or not parseable, a target in absolute-form, no Host header or two.

export interface RawHttp1Answer {
  status: number;
  // Lower-case names. A repeated header's values are joined with ", " (RFC 9110 5.3), as Node's client does.
  headers: Record<string, string>;
  // Decoded from chunked when sent so, then read as UTF-8.
  body: string;
}

// Writes `request` and reads the answer until the server closes the connection, which it must (after a refusal, a
// `Connection: close` request or an HTTP/1.0 one): reading to the close is what shows it did, and leaves no doubt
// where the answer ends. The request is not followed by a half-close: Node's server (httpAllowHalfOpen off) would
// abort a request whose answer its handler is still making.
export function rawRequest(port: number, request: string): Promise<RawHttp1Answer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write(request));
    const chunks: Buffer[] = [];
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", reject);
    socket.on("close", () => {
      try {
        resolve(parseAnswer(Buffer.concat(chunks)));
      } catch (err) {
        reject(err as Error);
      }
    });
  });
}

// One response. When its body is framed (Content-Length, chunked), bytes after it are refused rather than dropped: a
// second response or stray bytes on the connection would be a fault of the server that the test should see.
function parseAnswer(bytes: Buffer): RawHttp1Answer {
  const end = bytes.indexOf("\r\n\r\n");
  if (end < 0) throw new Error(`the connection closed after ${bytes.length} bytes, before the end of a response head`);
  const [statusLine = "", ...lines] = bytes.subarray(0, end).toString("latin1").split("\r\n");
  const status = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(statusLine)?.[1];
  if (status === undefined) throw new Error(`not an HTTP/1.1 status line: ${JSON.stringify(statusLine)}`);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon <= 0) throw new Error(`not a header line: ${JSON.stringify(line)}`);
    const name = line.slice(0, colon).toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  const rest = bytes.subarray(end + 4);
  if (headers["transfer-encoding"] === "chunked") return { status: Number(status), headers, body: unchunk(rest).toString("utf8") };
  // Without a Content-Length the body is all there is until the close.
  const length = headers["content-length"];
  if (length !== undefined && Number(length) !== rest.length) throw new Error(`content-length ${length}, and ${rest.length} bytes before the close`);
  return { status: Number(status), headers, body: rest.toString("utf8") };
}

// A chunked body: hex size lines (extensions ignored), each chunk followed by CRLF, then the last chunk (size 0).
// Trailers are not read: none of the answers tested has any, so one shows up as bytes after the response.
function unchunk(bytes: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = bytes.indexOf("\r\n", at);
    if (lineEnd < 0) throw new Error("the connection closed inside a chunked body");
    const sizeText = bytes.subarray(at, lineEnd).toString("latin1").split(";")[0]!.trim();
    if (!/^[0-9a-fA-F]+$/.test(sizeText)) throw new Error(`not a chunk size: ${JSON.stringify(sizeText)}`);
    const size = parseInt(sizeText, 16);
    at = lineEnd + 2;
    if (size === 0) break;
    if (at + size + 2 > bytes.length || bytes.toString("latin1", at + size, at + size + 2) !== "\r\n") throw new Error("a chunk cut off or not followed by CRLF");
    parts.push(bytes.subarray(at, at + size));
    at += size + 2;
  }
  if (bytes.toString("latin1", at) !== "\r\n") throw new Error("bytes after the last chunk (trailers, or a second response)");
  return Buffer.concat(parts);
}
