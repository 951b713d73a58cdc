import { randomBytes } from "node:crypto";
import { ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import type { UniversalServerRequest, UniversalServerResponse } from "../../src/transport/connect/connect-internals.js";
import { Base64Decoded, binaryFromText, decodeGroups, textFromBinary } from "../../src/transport/connect/grpc-web-text.js";

// gRPC-web's text form turned into the binary form connect-node serves, and its answer back.

class NotBase64 extends ConnectError {}
const refuse = () => new NotBase64("not base64");

async function* chunksOf(parts: (string | Uint8Array)[]): AsyncGenerator<Uint8Array> {
  for (const part of parts) yield typeof part === "string" ? Buffer.from(part, "latin1") : part;
}

async function readAll(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const chunk of body) out.push(Buffer.from(chunk));
  return Buffer.concat(out);
}

function request(contentType: string, parts: string[], extra: Record<string, string> = {}): UniversalServerRequest {
  return {
    httpVersion: "1.1",
    method: "POST",
    url: "http://x/kms.v1.KeyManagerService/Encrypt",
    header: new Headers({ "content-type": contentType, ...extra }),
    body: chunksOf(parts),
    signal: new AbortController().signal,
  } as UniversalServerRequest;
}

describe("decodeGroups", () => {
  it("decodes whole groups, padded ones anywhere among them", () => {
    const parts = [randomBytes(5), randomBytes(7), randomBytes(9), randomBytes(1)];
    const text = parts.map((p) => p.toString("base64")).join("");
    expect(Buffer.from(decodeGroups(text, refuse))).toEqual(Buffer.concat(parts));
  });

  it.each(["AB!D", "AB D", "ABC\n", "A===", "=AAA", "AB=C", "ABCD==AA", "-_AA"])("refuses %j", (text) => {
    expect(() => decodeGroups(text, refuse)).toThrow(NotBase64);
  });
});

describe("Base64Decoded", () => {
  it("passes on the same bytes wherever the text is cut", async () => {
    const bytes = randomBytes(100);
    const text = bytes.toString("base64");
    for (let cut = 0; cut <= text.length; cut++) {
      const decoded = await readAll(new Base64Decoded(chunksOf([text.slice(0, cut), text.slice(cut)]), refuse));
      expect(decoded).toEqual(bytes);
    }
    const oneByOne = await readAll(new Base64Decoded(chunksOf([...text]), refuse));
    expect(oneByOne).toEqual(bytes);
  });

  it("ends with the refusal when the body ends inside a group, after passing on what came before it", async () => {
    const passed: Buffer[] = [];
    const decoded = new Base64Decoded(chunksOf(["AAAA", "AAAAB"]), refuse);
    await expect(
      (async () => {
        for await (const chunk of decoded) passed.push(Buffer.from(chunk));
      })(),
    ).rejects.toThrow(NotBase64);
    expect(Buffer.concat(passed)).toEqual(Buffer.alloc(6));
  });

  it("closes its source when it is closed", async () => {
    let closed = false;
    const source: AsyncIterable<Uint8Array> = {
      [Symbol.asyncIterator]: () => ({
        next: () => Promise.resolve({ done: false, value: Buffer.from("AAAA") }),
        return: () => {
          closed = true;
          return Promise.resolve({ done: true, value: undefined });
        },
      }),
    };
    const decoded = new Base64Decoded(source, refuse);
    await decoded.next();
    await decoded.return();
    expect(closed).toBe(true);
    // Also when nothing was read yet.
    closed = false;
    await new Base64Decoded(source, refuse).return();
    expect(closed).toBe(true);
  });
});

describe("binaryFromText and textFromBinary", () => {
  it("leave other content types alone", () => {
    for (const type of ["application/grpc-web+proto", "application/grpc-web", "application/grpc", "application/json"]) {
      expect(binaryFromText(request(type, []), refuse)).toBeNull();
    }
  });

  it.each([
    ["application/grpc-web-text", "application/grpc-web+proto"],
    ["application/grpc-web-text+proto", "application/grpc-web+proto"],
    ["application/grpc-web-text+json", "application/grpc-web+json"],
  ])("serve %s as %s, with the text's length dropped, and decode its body", async (text, binary) => {
    const req = request(text, ["AAEC", "Aw=="], { "content-length": "8", "x-grpc-web": "1" });
    const served = binaryFromText(req, refuse)!;
    expect(served.header.get("content-type")).toBe(binary);
    expect(served.header.has("content-length")).toBe(false);
    expect(served.header.get("x-grpc-web")).toBe("1");
    // The request's own headers are not changed: a refusal before Connect still reads them.
    expect(req.header.get("content-type")).toBe(text);
    expect(await readAll(served.body as AsyncIterable<Uint8Array>)).toEqual(Buffer.from([0, 1, 2, 3]));
  });

  it("answer in base64, a padded segment per chunk, with the text form's content type", async () => {
    const frames = [Buffer.from([0, 0, 0, 0, 1, 42]), Buffer.from("\x80\x00\x00\x00\x0egrpc-status: 0", "latin1")];
    const res: UniversalServerResponse = {
      status: 200,
      header: new Headers({ "content-type": "application/grpc-web+proto", "content-length": "27" }),
      body: chunksOf(frames),
    };
    const text = textFromBinary(res);
    expect(text.header?.get("content-type")).toBe("application/grpc-web-text+proto");
    expect(text.header?.has("content-length")).toBe(false);
    expect((await readAll(text.body!)).toString("latin1")).toBe(frames.map((f) => f.toString("base64")).join(""));
  });

  it("close connect-node's answer when the text answer is closed before anything was read", async () => {
    let closed = false;
    const body: AsyncIterable<Uint8Array> = {
      [Symbol.asyncIterator]: () => ({
        next: () => Promise.resolve({ done: true, value: undefined }),
        return: () => {
          closed = true;
          return Promise.resolve({ done: true, value: undefined });
        },
      }),
    };
    const text = textFromBinary({ status: 200, header: new Headers({ "content-type": "application/grpc-web+proto" }), body });
    await text.body![Symbol.asyncIterator]().return?.();
    expect(closed).toBe(true);
  });

  it("leave an answer that is not gRPC-web alone, and say the text form of one without a body", () => {
    const refusal: UniversalServerResponse = { status: 415, header: new Headers({ accept: "application/grpc-web+proto" }) };
    expect(textFromBinary(refusal)).toBe(refusal);
    const trailersOnly: UniversalServerResponse = { status: 200, header: new Headers({ "content-type": "application/grpc-web+proto", "grpc-status": "16" }) };
    const text = textFromBinary(trailersOnly);
    expect(text.header?.get("content-type")).toBe("application/grpc-web-text+proto");
    expect(text.header?.get("grpc-status")).toBe("16");
    expect(text.body).toBeUndefined();
  });
});
