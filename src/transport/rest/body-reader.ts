import type { IncomingHttpHeaders } from "node:http";
import type { Readable } from "node:stream";
import { requestTooLarge } from "../../errors/protocol-errors.js";
import { serverBusy } from "../limits/body-budget.js";
import type { BodyBudget } from "../limits/body-budget.js";
import type { ErrorDomain } from "../../errors/reasons.js";

// The request went away before its body was complete; there is nobody to answer.
export class ClientGoneError extends Error {
  constructor() {
    super("the client closed the request before its body was complete");
    this.name = "ClientGoneError";
  }
}

// Reads the whole body, but never more than maxBytes: a declared Content-Length over the limit fails before
// reading anything, and a body that grows past it fails at the chunk that crosses it. The stream is then paused
// and left unread, so nothing more is buffered. Its bytes count against the server's budget (body-budget.ts) until it
// is whole or gone; a chunk the budget cannot take fails the same way, with serverBusy.
export function readBody(req: Readable & { headers: IncomingHttpHeaders }, maxBytes: number, domain: ErrorDomain, budget: BodyBudget): Promise<Uint8Array> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > maxBytes) return Promise.reject(requestTooLarge(domain, maxBytes));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let settled = false;
    const cleanup = (): void => {
      settled = true;
      budget.give(total);
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onGone);
      req.off("close", onGone);
    };
    const onData = (chunk: Buffer | string): void => {
      const buf = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      const refusal = total + buf.length > maxBytes ? requestTooLarge(domain, maxBytes) : budget.take(buf.length) ? null : serverBusy(domain, budget.maxBytes);
      if (refusal !== null) {
        cleanup();
        req.pause();
        reject(refusal);
        return;
      }
      total += buf.length;
      chunks.push(buf);
    };
    // A complete body leaves the listeners in place, doing nothing from then on: the request has nothing more to
    // read, and taking four listeners off a stream per request cost more than the rest of this function.
    const onEnd = (): void => {
      if (settled) return;
      settled = true;
      budget.give(total);
      resolve(chunks.length === 1 && chunks[0] !== undefined ? chunks[0] : Buffer.concat(chunks));
    };
    const onGone = (): void => {
      if (settled) return;
      cleanup();
      reject(new ClientGoneError());
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onGone);
    req.on("close", onGone);
  });
}
