import { gzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { CreateCryptoKeyRequestSchema } from "../../gen/kms/v1/kms_pb.js";
import type { ViolationList } from "../../src/errors/violation-list.js";
import { limitsOf } from "../../src/pipeline/message-limits.js";
import { countedRequest } from "../../src/transport/connect/counted-body.js";
import { FairTurns } from "../../src/transport/fair-turns.js";
import { BodyBudget } from "../../src/transport/limits/body-budget.js";
import type { UniversalServerRequest } from "../../src/transport/connect/connect-internals.js";
import { frame } from "../support/raw-grpc.js";

// The body connect-node reads for the calls it serves: the request's bytes unchanged, each message counted
// before the bytes that complete it are passed on.

const LIMITS = limitsOf(CreateCryptoKeyRequestSchema);
const MAX_BYTES = 4 * 1024 * 1024;

class Refused extends ConnectError {
  constructor(readonly violations: ViolationList) {
    super(violations.message());
  }
}
const refuse = (violations: ViolationList) => new Refused(violations);

function request(contentType: string, chunks: Uint8Array[], extra: Record<string, string> = {}): UniversalServerRequest {
  async function* body() {
    yield* chunks;
  }
  return {
    httpVersion: "2.0",
    method: "POST",
    url: "http://x/kms.v1.KeyManagerService/CreateCryptoKey",
    header: new Headers({ "content-type": contentType, ...extra }),
    body: body(),
    signal: new AbortController().signal,
  } as UniversalServerRequest;
}

// What the counted body passes on, or the refusal it ends with.
async function read(req: UniversalServerRequest): Promise<Buffer | Refused> {
  const counted = countedRequest(req, LIMITS, MAX_BYTES, refuse, null, false, null);
  const out: Uint8Array[] = [];
  try {
    for await (const chunk of counted.body as AsyncIterable<Uint8Array>) out.push(chunk);
  } catch (thrown) {
    if (thrown instanceof Refused) return thrown;
    throw thrown;
  }
  return Buffer.concat(out);
}

function splitAt(bytes: Buffer, ...cuts: number[]): Buffer[] {
  const bounds = [0, ...cuts, bytes.length];
  return bounds.slice(1).map((end, i) => bytes.subarray(bounds[i], end));
}

const message = (labels: number) => toBinary(CreateCryptoKeyRequestSchema, create(CreateCryptoKeyRequestSchema, { parentId: "p", labels: Array(labels).fill("l") }));
const flood = "labels: must hold at most 64 labels, got 65";

describe("the body connect-node reads", () => {
  it("passes every envelope on unchanged, however the chunks cut it", async () => {
    const body = Buffer.concat([frame(message(64)), frame(message(3))]);
    for (let a = 0; a <= body.length; a += 7) {
      for (const b of [a, a + 1, a + 5, body.length]) {
        const out = await read(request("application/grpc", splitAt(body, a, Math.min(b, body.length))));
        expect(out).toEqual(body);
      }
    }
  });

  it("ends with the refusal at the envelope over its limits, before passing on any of its bytes", async () => {
    const ok = frame(message(1));
    const over = frame(message(65));
    for (let cut = 1; cut < over.length; cut += 11) {
      const counted = countedRequest(request("application/grpc-web+proto", splitAt(Buffer.concat([ok, over]), ok.length + cut)), LIMITS, MAX_BYTES, refuse, null, false, null);
      const it = (counted.body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
      expect((await it.next()).value).toEqual(ok);
      await expect(it.next()).rejects.toThrow(flood);
    }
  });

  // connect-node allocates the length an envelope's header declares when it reads the header: a header alone must
  // not reach it.
  it("passes an envelope on only once it is whole, and of one cut short, less than a header", async () => {
    const ok = frame(message(1));
    const declared = Buffer.from([0, 0, 0x40, 0, 0]); // 4 MiB, the most the limit allows
    for (const chunks of [[ok, declared, Buffer.from([1, 2, 3])], [Buffer.concat([ok, declared.subarray(0, 2)]), declared.subarray(2)]]) {
      const it = (countedRequest(request("application/grpc", chunks), LIMITS, MAX_BYTES, refuse, null, false, null).body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
      expect((await it.next()).value).toEqual(ok);
      // The body ended inside the envelope: one byte of it, which Connect refuses as an incomplete envelope.
      expect(await it.next()).toEqual({ done: false, value: declared.subarray(0, 1) });
      expect((await it.next()).done).toBe(true);
    }
    // An envelope declared over the size limit is passed on at once, for Connect to refuse on its header.
    const huge = Buffer.from([0, 0xff, 0xff, 0xff, 0xff]);
    const it = (countedRequest(request("application/grpc", [huge, Buffer.from([1])]), LIMITS, MAX_BYTES, refuse, null, false, null).body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
    expect((await it.next()).value).toEqual(huge);
    expect((await it.next()).value).toEqual(Buffer.from([1]));
  });

  it("does not tell Connect a unary body's declared length, which it would allocate before reading a byte, unless over the limit", async () => {
    const within = countedRequest(request("application/json", [], { "content-length": String(MAX_BYTES) }), LIMITS, MAX_BYTES, refuse, null, false, null);
    expect(within.header.get("content-length")).toBeNull();
    // Over the limit: Connect refuses it on the header alone, before reading the body.
    const over = countedRequest(request("application/json", [], { "content-length": String(MAX_BYTES + 1) }), LIMITS, MAX_BYTES, refuse, null, false, null);
    expect(over.header.get("content-length")).toBe(String(MAX_BYTES + 1));
  });

  it("counts gzip-compressed envelopes, and leaves what Connect refuses to Connect", async () => {
    const gz = frame(gzipSync(message(65)));
    gz[0] = 1;
    expect(await read(request("application/grpc", [gz], { "grpc-encoding": "gzip" }))).toMatchObject({ message: `[unknown] ${flood}` });
    // An unknown compression, data that does not decompress, an envelope over the size limit: passed on.
    expect(await read(request("application/grpc", [gz], { "grpc-encoding": "lz4" }))).toEqual(gz);
    const garbage = Buffer.from([1, 0, 0, 0, 3, 1, 2, 3]);
    expect(await read(request("application/grpc", [garbage], { "grpc-encoding": "gzip" }))).toEqual(garbage);
    const huge = Buffer.from([0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3]);
    expect(await read(request("application/grpc", [huge]))).toEqual(huge);
  });

  it("counts a Connect unary body whole, binary or JSON, plain or compressed", async () => {
    const binary = Buffer.from(message(65));
    expect(await read(request("application/proto", splitAt(binary, 10, 20)))).toBeInstanceOf(Refused);
    expect(await read(request("application/proto", [Buffer.from(message(64))]))).toEqual(Buffer.from(message(64)));
    const json = Buffer.from(JSON.stringify({ parentId: "p", labels: Array(65).fill("l"), unknownMember: [1] }));
    expect(await read(request("application/json", splitAt(json, 3)))).toBeInstanceOf(Refused);
    expect(await read(request("application/json", [gzipSync(json)], { "content-encoding": "gzip" }))).toBeInstanceOf(Refused);
    const streamed = frame(Buffer.from(JSON.stringify({ labels: Array(65).fill("l") })));
    expect(await read(request("application/connect+json", [streamed]))).toBeInstanceOf(Refused);
  });

  it("passes the failure of the request's own body on in a turn with room for it", async () => {
    const gone = new Error("the peer left");
    async function* failing() {
      yield frame(message(1));
      throw gone;
    }
    const req = { ...request("application/grpc", []), body: failing() } as UniversalServerRequest;
    // A budget of 0: every task waits for a later turn.
    const turns = new FairTurns(0, (err) => {
      throw err;
    });
    const it = (countedRequest(req, LIMITS, MAX_BYTES, refuse, turns, false, null).body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
    await it.next();
    let settled = false;
    const failed = it.next().finally(() => (settled = true));
    await new Promise((resolve) => process.nextTick(resolve));
    expect(settled).toBe(false);
    await expect(failed).rejects.toBe(gone);
  });

  it("refuses an envelope whose flags are neither 0 nor 1, once its header is read, after the size check", async () => {
    for (const [contentType, flags, text] of [
      ["application/grpc", 0x02, "gRPC"],
      ["application/grpc-web+proto", 0x80, "gRPC-web"],
      ["application/grpc", 0x81, "gRPC"],
    ] as const) {
      const bad = frame(message(1));
      bad[0] = flags;
      const it = (countedRequest(request(contentType, [frame(message(1)), bad.subarray(0, 5)]), LIMITS, MAX_BYTES, refuse, null, false, null).body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
      await it.next();
      const refused = await it.next().then(
        () => undefined,
        (thrown: unknown) => thrown as ConnectError,
      );
      expect(refused?.code).toBe(Code.InvalidArgument);
      expect(refused?.rawMessage).toBe(`the request is not one uncompressed protobuf message in a ${text} envelope`);
    }
    // A header declaring more than the limit is passed on for Connect to refuse as too large, whatever its flags.
    const huge = Buffer.from([0x80, 0, 0x50, 0, 0]);
    expect(await read(request("application/grpc", [huge]))).toEqual(huge);
  });

  // As the gRPC adapter reads a unary body (unaryPayload): one envelope, held back until the body ends; bytes after
  // it are refused then, in that adapter's order, before the message is counted; otherwise the message is counted
  // and passed on. Whatever the cuts.
  it("refuses a unary body with bytes after its message as the gRPC adapter does, however it is cut", async () => {
    const readUnary = async (chunks: Buffer[]): Promise<{ passed: Buffer; refused: string | null }> => {
      const counted = countedRequest(request("application/grpc", chunks), LIMITS, MAX_BYTES, refuse, null, true, null);
      const out: Uint8Array[] = [];
      try {
        for await (const chunk of counted.body as AsyncIterable<Uint8Array>) out.push(chunk);
      } catch (thrown) {
        return { passed: Buffer.concat(out), refused: thrown instanceof ConnectError ? `${thrown.code} ${thrown.rawMessage}` : String(thrown) };
      }
      return { passed: Buffer.concat(out), refused: null };
    };
    const first = frame(message(1));
    const badFlags = frame(message(1));
    badFlags[0] = 0x02;
    const notOne = `${Code.Unimplemented} a unary call sends exactly one request message`;
    const malformed = `${Code.InvalidArgument} the request is not one uncompressed protobuf message in a gRPC envelope`;
    const tooLarge = `${Code.ResourceExhausted} the request is larger than ${MAX_BYTES} bytes`;
    for (const [one, rest, refused] of [
      // A second message, over the limits of its type: not one message, never a count of it.
      [first, frame(message(65)), notOne],
      // The first over its limits, with bytes after it: refused for those bytes, as the gRPC adapter refuses it.
      [frame(message(65)), frame(message(1)), notOne],
      [frame(message(65)), Buffer.from([1, 2, 3]), malformed],
      [first, Buffer.concat([frame(message(1)), Buffer.from([0x02, 0, 0, 0, 0])]), notOne],
      [first, badFlags, malformed],
      [first, Buffer.from([0, 0, 0]), malformed],
      [first, frame(message(3)).subarray(0, 8), malformed],
      [first, Buffer.from([0, 0xff, 0xff, 0xff, 0xff]), tooLarge],
    ] as const) {
      const body = Buffer.concat([one, rest]);
      for (const chunks of [[body], splitAt(body, 2), splitAt(body, one.length), splitAt(body, one.length + 1, one.length + 4)]) {
        expect(await readUnary(chunks)).toEqual({ passed: Buffer.alloc(0), refused });
      }
    }
    // One message alone is passed on and counted; over its limits it is refused as in any call.
    expect(await readUnary(splitAt(first, 3))).toEqual({ passed: first, refused: null });
    expect((await readUnary([frame(message(65))])).refused).toContain(flood);
  });

  // The server's budget of request bodies holds a body's bytes while it arrives, and has them back however the body
  // ends: read whole, refused, failed, or left unread by Connect; past the budget, the body is refused as busy.
  it("counts the bytes it reads against the server's budget until the body ends, however it ends", async () => {
    const budget = new BodyBudget(1024);
    const readWith = async (req: UniversalServerRequest, stopAfterFirst = false): Promise<string> => {
      const it = (countedRequest(req, LIMITS, MAX_BYTES, refuse, null, false, budget).body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
      try {
        for (let r = await it.next(); r.done !== true; r = await it.next()) {
          expect(budget.heldBytes).toBeGreaterThan(0);
          if (stopAfterFirst) {
            await it.return!();
            return "returned";
          }
        }
        return "whole";
      } catch (thrown) {
        // ConnectError's instanceof takes any ConnectError for a Refused: told apart by code.
        if (thrown instanceof ConnectError && thrown.code === Code.Unavailable) return `${thrown.code} ${thrown.rawMessage}`;
        return thrown instanceof Refused ? "over limits" : String(thrown);
      }
    };
    const two = Buffer.concat([frame(message(1)), frame(message(2))]);
    expect(await readWith(request("application/grpc", splitAt(two, 3, 12)))).toBe("whole");
    expect(budget.heldBytes).toBe(0);
    expect(await readWith(request("application/grpc", splitAt(two, 12)), true)).toBe("returned");
    expect(budget.heldBytes).toBe(0);
    expect(await readWith(request("application/grpc", [frame(message(65))]))).toBe("over limits");
    expect(budget.heldBytes).toBe(0);
    async function* failing() {
      yield frame(message(1));
      throw new Error("the peer left");
    }
    expect(await readWith({ ...request("application/grpc", []), body: failing() } as UniversalServerRequest)).toBe("Error: the peer left");
    expect(budget.heldBytes).toBe(0);
    const large = Buffer.alloc(800, 0x61);
    expect(await readWith(request("application/proto", [large, large]))).toBe(
      `${Code.Unavailable} the server holds as many request bodies as it may (1024 bytes in all); retry in a moment`,
    );
    expect(budget.heldBytes).toBe(0);
  });

  it("leaves alone what no protocol of Connect's reads", async () => {
    const body = Buffer.from(message(65));
    expect(await read(request("text/plain", [body]))).toEqual(body);
    expect(await read(request("application/grpc-web-text", [body]))).toEqual(body);
  });
});
