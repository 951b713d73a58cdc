import http2 from "node:http2";

// One request on an HTTP/2 session of its own, headers as given (pseudo-headers included), the answer as it came:
// its status and headers, its body as text, and the code of the RST_STREAM that ended it (0 when none did).
export interface Http2Answer {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: string;
  rstCode: number;
}

export function http2Request(url: string, headers: http2.OutgoingHttpHeaders, body?: Buffer): Promise<Http2Answer> {
  const session = http2.connect(url);
  return http2RequestOn(session, headers, body).finally(() => session.close());
}

// One request on a session the caller holds (and closes).
export function http2RequestOn(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: Buffer): Promise<Http2Answer> {
  return new Promise((resolve, reject) => {
    session.once("error", reject);
    const req = session.request(headers);
    let answer: http2.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    req.on("response", (h) => (answer = h));
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("close", () => {
      session.off("error", reject);
      resolve({ status: Number(answer[":status"]), headers: answer, body: Buffer.concat(chunks).toString(), rstCode: req.rstCode ?? 0 });
    });
    // A reset stream ends with "close" too, which resolves with its code.
    req.on("error", () => {});
    req.end(body);
  });
}
