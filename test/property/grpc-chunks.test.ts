import { randomBytes } from "node:crypto";
import http2 from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DecryptRequestSchema, EncryptRequestSchema, EncryptResponseSchema } from "../../gen/kms/v1/kms_pb.js";
import { buildEnvelope, envelopeArb, unaryMethods } from "./arbitraries.js";
import type { EnvelopePlan } from "./arbitraries.js";
import { callInParts } from "../support/raw-grpc.js";
import type { GrpcOutcome } from "../support/raw-grpc.js";
import { PROPERTY_TEST_TIMEOUT_MS, RUNS, startPropertyServer, stopPropertyServer } from "./harness.js";
import type { PropertyServer } from "./harness.js";

// The answer to a gRPC body does not depend on how it is cut into HTTP/2 DATA frames: on the direct path, bodies of
// more than one chunk are joined as they arrive, into a buffer of a pool once half of what their envelope declares
// has come (src/transport/grpc/body-pool.ts); on Connect's, a unary body ends at its message and what follows is
// refused as the direct path refuses it (src/transport/connect/counted-body.ts). Arbitrary envelopes (cut
// short, lying lengths, several messages, trailing bytes) and valid Decrypts of up to the largest plaintext, each
// sent once whole and once in random parts, get the same status, message and details, and the same response when
// they succeed (an Encrypt's differs by its nonce: only its status is compared).

// Methods that change nothing, so that the second send meets the store the first one did.
const READ_ONLY = new Set(["Encrypt", "Decrypt", "GetCryptoKey", "ListCryptoKeys", "GetCryptoKeyVersion", "ListCryptoKeyVersions"]);
const methods = unaryMethods.filter((m) => m.path.startsWith("/kms.v1.KeyManagerService/") && READ_ONLY.has(m.method.name));

describe.each(["direct", "connect"])("gRPC bodies in parts, CALL_PATH=%s", (callPath) => {
  let ps: PropertyServer;
  let session: http2.ClientHttp2Session;
  let sent = 0;
  beforeAll(async () => {
    ps = await startPropertyServer(callPath);
    session = http2.connect(ps.server.url);
  });
  afterAll(async () => {
    session.close();
    await stopPropertyServer(ps);
  });

  const send = (path: string, parts: Buffer[], requestId: string): Promise<GrpcOutcome> =>
    callInParts(session, { ":path": path, authorization: ps.target.authorization, "x-request-id": requestId }, parts, 1);

  // Cut at the given ten-thousandths of the body.
  function cutAt(body: Buffer, at: number[]): Buffer[] {
    const cuts = [...new Set(at.map((n) => Math.floor((n / 10_000) * body.length)))].filter((c) => c > 0 && c < body.length).sort((a, b) => a - b);
    return [0, ...cuts].map((start, i) => body.subarray(start, cuts[i] ?? body.length));
  }

  const framed = (payload: Uint8Array): Buffer => buildEnvelope({ frames: [{ flag: 0, payload, length: undefined }] });

  // A Decrypt of a ciphertext of `bytes` random bytes, sealed by the server first.
  async function decryptBody(bytes: number): Promise<Buffer> {
    const keyId = ps.known[0]!;
    const sealed = await send(encryptPath, [framed(toBinary(EncryptRequestSchema, create(EncryptRequestSchema, { keyId, keyVersionId: 1, plaintext: randomBytes(bytes) })))], `seal-${++sent}`);
    if (sealed.status !== "0") throw new Error(`Encrypt answered ${String(sealed.status)} ${String(sealed.message)}`);
    const { ciphertext } = fromBinary(EncryptResponseSchema, sealed.body.subarray(5));
    return framed(toBinary(DecryptRequestSchema, create(DecryptRequestSchema, { keyId, ciphertext })));
  }

  const encryptPath = "/kms.v1.KeyManagerService/Encrypt";

  it(
    "answers a body in parts as the same body whole",
    async () => {
      const plans = fc.oneof(
        fc.constantFrom(...methods).chain((m) => fc.record({ path: fc.constant(m.path), envelope: envelopeArb(m.method, ps.known).map((e: EnvelopePlan) => ({ body: buildEnvelope(e) })) })),
        fc.record({ path: fc.constant("/kms.v1.KeyManagerService/Decrypt"), envelope: fc.integer({ min: 1, max: 65_536 }).map((bytes) => ({ plaintextBytes: bytes })) }),
      );
      await fc.assert(
        fc.asyncProperty(plans, fc.array(fc.integer({ min: 1, max: 9_999 }), { minLength: 1, maxLength: 6 }), async ({ path, envelope }, at) => {
          const body = "body" in envelope ? envelope.body : await decryptBody(envelope.plaintextBytes);
          const requestId = `chunks-${callPath}-${++sent}`;
          const whole = await send(path, [body], requestId);
          const inParts = await send(path, cutAt(body, at), requestId);
          expect(whole.status).toBeDefined();
          if (path === encryptPath && whole.status === "0") expect(inParts.status).toBe("0");
          else expect(inParts).toEqual(whole);
        }),
        { numRuns: Math.max(20, Math.floor(RUNS / 2)) },
      );
    },
    PROPERTY_TEST_TIMEOUT_MS,
  );
});
