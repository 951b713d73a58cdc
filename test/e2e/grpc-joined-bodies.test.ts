import { randomBytes } from "node:crypto";
import http2 from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EncryptRequestSchema, EncryptResponseSchema } from "../../gen/kms/v1/kms_pb.js";
import type { EncryptRequest } from "../../gen/kms/v1/kms_pb.js";
import type { Stage } from "../../src/pipeline/stage.js";
import { adminAuth } from "../support/credentials.js";
import { createKmsClient } from "../support/kms-clients.js";
import type { KmsClient } from "../support/kms-clients.js";
import { callInParts, frame } from "../support/raw-grpc.js";
import type { GrpcOutcome } from "../support/raw-grpc.js";
import { startServer } from "../support/server.js";
import type { TestServer } from "../support/server.js";

// A gRPC body of more than one chunk is copied as it arrives into a buffer of a pool, which a later call uses again
// once its call is answered (src/transport/grpc/body-pool.ts). Nothing of one call may show in another's: every
// ciphertext opens to its own plaintext under heavy reuse, a body split anywhere reads as the same bytes in one
// write, and one that is not exactly one message is answered as it is in one write.

// A stage before the handler that holds the Encrypts a caller marks with x-test-hold for 300 ms, past their
// deadline, and then tells whether their plaintext still reads as it did: a call its deadline answered keeps running,
// and the buffer its request is a view of must not have gone to another call meanwhile.
const held: { unchanged: boolean }[] = [];
const holdStage: Stage = (call, next) => {
  if (call.headers.get("x-test-hold") !== "1") return next(call);
  const plaintext = (call.request as EncryptRequest).plaintext;
  const before = createHash("sha256").update(plaintext).digest("hex");
  return new Promise((resolve) => setTimeout(resolve, 300)).then(() => {
    held.push({ unchanged: createHash("sha256").update(plaintext).digest("hex") === before });
    return next(call);
  });
};

let server: TestServer;
let kms: KmsClient;
beforeAll(async () => {
  server = await startServer({ stages: [holdStage] });
  kms = createKmsClient("grpc", server.url);
});
afterAll(async () => {
  await kms.close();
  await server.stop();
});

// One gRPC Encrypt on its own session, its body written in `parts`, each arriving as chunks of its own.
async function sendInParts(parts: Buffer[], extra: http2.OutgoingHttpHeaders = {}): Promise<GrpcOutcome> {
  const session = http2.connect(server.url);
  try {
    return await callInParts(session, { ":path": "/kms.v1.KeyManagerService/Encrypt", ...adminAuth(server.url), ...extra }, parts, 5);
  } finally {
    session.close();
  }
}

function split(bytes: Buffer, at: number[]): Buffer[] {
  const cuts = [0, ...at, bytes.length];
  return cuts.slice(1).map((end, i) => bytes.subarray(cuts[i], end));
}

function encryptFrame(keyId: string, plaintext: Uint8Array): Buffer {
  return frame(toBinary(EncryptRequestSchema, create(EncryptRequestSchema, { keyId, keyVersionId: 1, plaintext })));
}

describe("gRPC request bodies in buffers used again", () => {
  it("opens every ciphertext to its own plaintext, with many large calls at once on several keys", async () => {
    const keys = await Promise.all([1, 2, 3].map(async () => (await kms.createKey({ parentId: "pool", defaultAlgorithm: "AES_256" })).id!));
    for (let round = 0; round < 4; round++) {
      // Sizes from 20 KB to the largest plaintext (64 KiB), so that calls of one size class and of others follow
      // each other; the first round finds no key in the cache (its handlers answer later, with a promise).
      const inputs = Array.from({ length: 48 }, (_, i) => ({
        keyId: keys[i % keys.length]!,
        plaintext: randomBytes(20_000 + Math.floor(Math.random() * 45_536)),
        aad: randomBytes(1 + (i % 64)),
      }));
      const sealed = await Promise.all(inputs.map((input) => kms.encrypt({ ...input, keyVersionId: 1 })));
      const opened = await Promise.all(sealed.map((s, i) => kms.decrypt({ keyId: inputs[i]!.keyId, ciphertext: s.ciphertext, aad: inputs[i]!.aad })));
      opened.forEach((o, i) => {
        expect(o.keyId).toBe(inputs[i]!.keyId);
        expect(Buffer.from(o.plaintext).equals(inputs[i]!.plaintext)).toBe(true);
      });
    }
  });

  it("reads a body split anywhere, its envelope over two chunks included, as the same body in one write", async () => {
    const keyId = (await kms.createKey({ parentId: "pool", defaultAlgorithm: "AES_256" })).id!;
    const plaintext = randomBytes(65_536);
    const body = encryptFrame(keyId, plaintext);
    for (const at of [[3], [5], [3, 40_000], [16_384, 32_768, 49_152, 65_536], [1, 2, 3, 4, 5, 6, 65_000]]) {
      const answer = await sendInParts(split(body, at));
      expect(answer.status).toBe("0");
      const response = fromBinary(EncryptResponseSchema, answer.body.subarray(5));
      const opened = await kms.decrypt({ keyId, ciphertext: response.ciphertext });
      expect(Buffer.from(opened.plaintext).equals(plaintext)).toBe(true);
    }
  });

  it("answers a body longer than its envelope declares, in chunks, as in one write: not one message", async () => {
    const keyId = (await kms.createKey({ parentId: "pool", defaultAlgorithm: "AES_256" })).id!;
    const body = Buffer.concat([encryptFrame(keyId, randomBytes(60_000)), Buffer.from([0, 0, 0, 0, 0])]);
    const whole = await sendInParts([body]);
    expect(whole.status).toBe("12");
    for (const at of [[40_000], [30_000, 60_000], [body.length - 3]]) expect(await sendInParts(split(body, at))).toEqual(whole);
  });

  it("answers a body shorter than its envelope declares, in chunks, as in one write: malformed", async () => {
    const keyId = (await kms.createKey({ parentId: "pool", defaultAlgorithm: "AES_256" })).id!;
    const body = encryptFrame(keyId, randomBytes(60_000)).subarray(0, 50_000);
    const whole = await sendInParts([body]);
    expect(whole.status).toBe("3");
    for (const at of [[20_000], [35_000, 45_000]]) expect(await sendInParts(split(body, at))).toEqual(whole);
  });

  it("answers an envelope that declares more than the limit as too large, however its prefix is cut", async () => {
    const body = Buffer.from([0, 0x7f, 0xff, 0xff, 0xff, 1, 2, 3]);
    const whole = await sendInParts([body]);
    expect(whole.status).toBe("8");
    for (const at of [[1], [3], [1, 2, 3, 4]]) expect(await sendInParts(split(body, at))).toEqual(whole);
  });

  it("leaves the buffer of a call its deadline answered to that call, whose handler may still read it", async () => {
    const keyId = (await kms.createKey({ parentId: "pool", defaultAlgorithm: "AES_256" })).id!;
    const body = encryptFrame(keyId, randomBytes(60_000));
    const late = await sendInParts(split(body, [30_000]), { "x-test-hold": "1", "grpc-timeout": "50m" });
    expect(late.status).toBe("4");
    // Bodies of the same size class while the held call waits, each of which would get its buffer if it were back.
    await Promise.all(Array.from({ length: 8 }, () => sendInParts(split(encryptFrame(keyId, randomBytes(60_000)), [30_000]))));
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(held).toEqual([{ unchanged: true }]);
  });
});
